#!/bin/bash
# On the GPU machine (~5 min on an H200): rung 3 persistent (chapter 12's appendix on short work items: one 8-warp
# consumer of 128 rows, whose two warpgroups run the same code, so a work item fetches half the instructions of
# rung 4's two consumers) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) causal and not, (8, 32, 512, 128),
#     (8, 32, 2048, 128) and (1, 32, 8192, 128) causal bf16: the candidates that passed beside the table's rung-4
#     configs there, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: rung3_persistent.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# rung3_persistent_ab_1.csv, rung3_persistent_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r3_persistent_split r3_persistent_split_pairplan"
K=r4_n128b2_persistent_split_half_pairplan,r4_n128b2_pingpong_persistent_split
check_and_time rung3_persistent "$NEW" $K 32x32x512x128c,32x32x512x128f,8x32x512x128c,8x32x2048x128c,1x32x8192x128c
