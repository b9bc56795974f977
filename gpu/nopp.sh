#!/bin/bash
# On the GPU machine (~3.5 min on an H200): PINGPONG off (chapter 12's appendix on short work items: the persistent configs with the two consumers issuing
# their wgmmas without taking turns) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each non-ping-pong candidate of fa2/gluon/candidates.py, and
#     gpu/gluon_window.py's 12 window cases for them, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (8, 32, 2048, 128), (1, 32, 8192, 128) and
#     (32, 32, 512, 128) causal: the candidates that passed both beside the same configs with PINGPONG, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: nopp.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, nopp_ab_1.csv,
# nopp_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_persistent_split_half r4_n128b2_persistent_split"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_pingpong_persistent_split
check_and_time nopp "$NEW" $K 8x32x2048x128c,1x32x8192x128c,32x32x512x128c
