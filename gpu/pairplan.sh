#!/bin/bash
# On the GPU machine (~4 min on an H200): SCHEDULED=2 (chapter 12's appendix on short work items: the paired order from a table whose last
# round is planned tile by tile, attention_hopper.paired_schedule_table) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 2048, 128),
#     (1, 32, 8192, 128) and (8, 16, 2048, 64) causal bf16: the candidates that passed beside the same configs with
#     the paired launch, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: pairplan.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# pairplan_ab_1.csv, pairplan_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_pingpong_persistent_split_half_pairplan r4_n128b2_persistent_split_half_pairplan"
NEW="$NEW r4_n64b3_persistent_own_pairplan"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_persistent_split_half,r4_n64b3_persistent_own
check_and_time pairplan "$NEW" $K 32x32x512x128c,8x32x2048x128c,1x32x8192x128c,8x16x2048x64c
