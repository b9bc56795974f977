#!/bin/bash
# On the GPU machine (~4 min on an H200): the no-ping-pong persistent configs with Q_EARLY, and the 64-key
# persistent config with own key ranges without ping-pong (chapter 12's appendix on short work items), checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 2048, 128) causal bf16
#     and (8, 16, 2048, 64) causal bf16: the candidates that passed beside the shipped persistent config, the same
#     without ping-pong, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: nopp_early.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# nopp_early_ab_1.csv, nopp_early_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_persistent_split_half_early r4_n128b2_persistent_split_early r4_n64b3_persistent_own"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_persistent_split_half
check_and_time nopp_early "$NEW" $K 32x32x512x128c,8x32x2048x128c,8x16x2048x64c
