#!/bin/bash
# On the GPU machine (~7 min on an H200): SWAP_ROWS (chapter 12's appendix on short work items: the two consumers
# trade query-row halves on odd items, so the one whose rows see half a diagonal tile fewer keys alternates)
# checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 2048, 128),
#     (1, 32, 8192, 128) and (8, 32, 512, 128) causal bf16: the candidates that passed beside the same configs
#     without SWAP_ROWS, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: swap_rows.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# swap_rows_ab_1.csv, swap_rows_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_persistent_split_half_pairplan_swap r4_n128b2_persistent_split_half_swap"
NEW="$NEW r4_n128b2_pingpong_persistent_split_half_swap"
K=r4_n128b2_persistent_split_half_pairplan,r4_n128b2_persistent_split_half,r4_n128b2_pingpong_persistent_split_half
check_and_time swap_rows "$NEW" $K 32x32x512x128c,8x32x2048x128c,1x32x8192x128c,8x32x512x128c
