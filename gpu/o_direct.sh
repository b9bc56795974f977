#!/bin/bash
# On the GPU machine (~7 min on an H200): O_DIRECT (O stored from registers, no staging buffer) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 512, 128),
#     (8, 32, 2048, 128) and (1, 32, 8192, 128) causal bf16: the candidates that passed beside the table's configs
#     at those shapes (and the one it ran at (32, 32, 512, 128) before the deeper ring), chapter 6's kernel, the
#     shipped choice and cuDNN.
# Results under $OUT: o_direct.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# o_direct_ab_1.csv, o_direct_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_persistent_split_half_pairplan_direct r4_n128b3_persistent_split_half_pairplan_direct"
NEW="$NEW r4_n64b4_persistent_own_pairplan_direct r4_n64b6_persistent_own_pairplan_direct"
NEW="$NEW r4_n128b3_pingpong_persistent_split_half_direct r4_n128b3_pingpong_scheduled_split_direct"
K=r4_n64b4_persistent_own_pairplan,r4_n64b5_persistent_own_pairplan,r4_n128b2_pingpong_persistent_split_half
K=$K,r4_n128b2_pingpong_scheduled_split,r4_n128b2_persistent_split_half_pairplan
check_and_time o_direct "$NEW" $K 32x32x512x128c,8x32x512x128c,8x32x2048x128c,1x32x8192x128c 220
