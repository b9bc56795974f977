#!/bin/bash
# On the GPU machine (~6 min on an H200): CHAIN_RANGES (chapter 12's appendix on short work items: an item's key ranges, mask-free then masked, run
# as one pipeline: the first masked S issued beside the last mask-free P·V) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each *_chain candidate of fa2/gluon/candidates.py, and
#     gpu/gluon_window.py's 12 window cases for them, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (8, 32, 2048, 128), (1, 32, 8192, 128) and
#     (32, 32, 512, 128) causal: the candidates that passed both beside the same configs without it, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: chain.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, chain_ab_1.csv,
# chain_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_pingpong_persistent_split_half_chain r4_n128b2_pingpong_scheduled_split_chain r4_n128b2_pingpong_persistent_split_chain r4_n64b3_pingpong_persistent_chain"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_pingpong_scheduled_split,r4_n128b2_pingpong_persistent_split,r4_n64b3_pingpong_persistent
check_and_time chain "$NEW" $K 8x32x2048x128c,1x32x8192x128c,32x32x512x128c
