#!/bin/bash
# On the GPU machine (~5 min on an H200): TABLE_AHEAD (chapter 12's appendix on short work items: a SCHEDULED program reads each work item's
# table entry an item ahead, so no read of the table is on its path) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each *_ahead candidate of fa2/gluon/candidates.py, and
#     gpu/gluon_window.py's 12 window cases for them, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (8, 32, 2048, 128), (1, 32, 8192, 128) and
#     (32, 32, 512, 128) causal: the candidates that passed both beside the same configs without it, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: table_ahead.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, table_ahead_ab_1.csv,
# table_ahead_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_pingpong_scheduled_split_half_ahead r4_n128b2_pingpong_scheduled_split_ahead r4_n64b3_pingpong_scheduled_ahead"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_pingpong_scheduled_split_half,r4_n128b2_pingpong_scheduled_split,r4_n64b3_pingpong_scheduled
check_and_time table_ahead "$NEW" $K 8x32x2048x128c,1x32x8192x128c,32x32x512x128c
