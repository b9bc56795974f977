#!/bin/bash
# On the GPU machine (~5 min on an H200): rung 3 at two programs per SM with D = 64 in mind (128-key tiles in two or
# three buffers, three 64-key buffers; chapter 12's appendix on short work items, *Two programs per SM*), where the
# weakest D = 64 shapes are: (1, 16, 16384, 64) non-causal (a headline shape, chapter 6's kernel), (8, 16, 2048, 64)
# causal and not, (32, 16, 2048, 64) causal, bf16.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at those shapes: the candidates that passed beside
#     rung 3's 64-key config at two per SM and the table's rung-1 configs, chapter 6's kernel, the shipped choice
#     and cuDNN.
# Results under $OUT: x2_d64.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, x2_d64_ab_{1,2}.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r3_m64n128b2_persistent_split_x2 r3_m64n128b3_persistent_split_x2 r3_m64n64b3_persistent_split_x2"
K=r3_m64n64b2_persistent_split_x2,r1_m64n128b2w4,r1_m64n64b2w4
check_and_time x2_d64 "$NEW" $K 1x16x16384x64f,8x16x2048x64f,8x16x2048x64c,32x16x2048x64c 130
