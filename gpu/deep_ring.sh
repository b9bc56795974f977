#!/bin/bash
# On the GPU machine (~6 min on an H200): a deeper ring of 64-key tiles for short causal items (chapter 12's
# appendix on short work items): 4 and 5 K/V buffers instead of 3, so more of the next tiles' loads are in flight.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 512, 128),
#     (8, 32, 2048, 128) and (1, 32, 8192, 128) causal bf16: the candidates that passed beside the table's config at
#     (32, 32, 512, 128), the same ring of 3 buffers, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: deep_ring.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# deep_ring_ab_1.csv, deep_ring_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n64b4_persistent_own_pairplan r4_n64b5_persistent_own_pairplan r4_n64b5_persistent_own_split_pairplan r4_n64b5_persistent_own"
K=r4_n128b2_persistent_split_half_pairplan,r4_n64b3_persistent_own_pairplan
check_and_time deep_ring "$NEW" $K 32x32x512x128c,8x32x512x128c,8x32x2048x128c,1x32x8192x128c 150
