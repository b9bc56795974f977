#!/bin/bash
# On the GPU machine (~8 min on an H200): OWN_RANGES=2 (chapter 12's appendix on short work items: each consumer
# visits its own keys from the diagonal down, so an item is one pipeline, the masked diagonal tile its peeled
# first step) in the 64-key persistent rings the table runs at N = 512 causal; checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each candidate, and gpu/gluon_window.py's 12 window cases for them
#     (under a window the kernel keeps the ascending order).
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 512, 128) and
#     (1, 32, 8192, 128) causal: the candidates that passed both beside the table's config at the first shape,
#     chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: own_down.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# own_down_ab_1.csv, own_down_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n64b5_persistent_own_pairplan_down r4_n64b4_persistent_own_pairplan_down"
NEW="$NEW r4_n64b3_persistent_own_pairplan_down r4_n64b5_persistent_own_down"
check_and_time own_down "$NEW" r4_n64b5_persistent_own_pairplan 32x32x512x128c,8x32x512x128c,1x32x8192x128c 130
