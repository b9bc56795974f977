#!/bin/bash
# On the GPU machine (~5 min on an H200): rung 3 on 64-row tiles, persistent, two programs per SM
# (PROGRAMS_PER_SM=2; chapter 12's appendix on short work items). Rung 4's two consumer partitions are two copies of
# the consumer's code, and at (32, 32, 512, 128) causal its warps wait for instructions about as often as they
# issue; two programs of one 64-row consumer each run one copy between them, as cuDNN's two consumers do, and still
# drift apart. Checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 512, 128) causal and
#     (8, 32, 2048, 128) causal bf16: the candidates that passed beside the table's config at N = 512, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: rung3_x2.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# rung3_x2_ab_1.csv, rung3_x2_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r3_m64n64b2_persistent_x2 r3_m64n64b2_persistent_split_x2 r3_m64n64b2_persistent_pairplan_x2"
NEW="$NEW r3_m64n64b2_persistent_early_x2"
K=r4_n64b5_persistent_own_pairplan
check_and_time rung3_x2 "$NEW" $K 32x32x512x128c,8x32x512x128c,8x32x2048x128c
