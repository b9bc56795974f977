#!/bin/bash
# On the GPU machine (~5 min on an H200): HALF_DIAGONAL (chapter 12 §12.11: rung 4's lower consumer computes only
# the first 64 keys of a 128-key diagonal tile) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each *_half candidate of fa2/gluon/candidates.py, and
#     gpu/gluon_window.py's 12 window cases for them, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (8, 32, 2048, 128), (1, 32, 8192, 128) and
#     (32, 32, 512, 128) causal: the candidates that passed both beside the same configs without it, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: half.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, half_ab_1.csv,
# half_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_pingpong_persistent_split_half r4_n128b2_pingpong_scheduled_split_half r4_n128b2_pingpong_split_half"
K=r4_n128b2_pingpong_persistent_split,r4_n128b2_pingpong_scheduled_split,r4_n128b2_pingpong_split
check_and_time half "$NEW" $K 8x32x2048x128c,1x32x8192x128c,32x32x512x128c
