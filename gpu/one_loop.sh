#!/bin/bash
# On the GPU machine (~6 min on an H200): ONE_LOOP (chapter 12's appendix on short work items: an item's key range
# in one pipeline, so that a work item runs one copy of the pipeline's code; =1 its masked tiles picked at run
# time, =2 every tile masked) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 512, 128),
#     (8, 32, 2048, 128) and (1, 32, 8192, 128) causal bf16: the candidates that passed beside the same configs
#     without ONE_LOOP, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: one_loop.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# one_loop_ab_1.csv, one_loop_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_persistent_split_half_pairplan_oneloop r4_n128b2_persistent_split_half_pairplan_allmasked"
NEW="$NEW r4_n128b2_pingpong_persistent_split_oneloop r4_n128b2_pingpong_persistent_split_allmasked"
K=r4_n128b2_persistent_split_half_pairplan,r4_n128b2_pingpong_persistent_split
check_and_time one_loop "$NEW" $K 32x32x512x128c,8x32x512x128c,8x32x2048x128c,1x32x8192x128c
