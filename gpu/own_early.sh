#!/bin/bash
# On the GPU machine (~5 min on an H200): Q_EARLY with OWN_RANGES (chapter 12's appendix on short work items: each
# consumer loads its next work item's Q right after the last S = Q·Kᵀ of its own key range, before that range's last
# P·V and its trailing skipped tiles) in the deep 64-key rings the table runs at N = 512 causal, checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each *_own_pairplan_early candidate of fa2/gluon/candidates.py, and
#     gpu/gluon_window.py's 12 window cases for them, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 512, 128) causal: the
#     candidates that passed both beside the same configs without it, chapter 6's kernel, the shipped choice and
#     cuDNN.
# Results under $OUT: own_early.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# own_early_ab_1.csv, own_early_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n64b5_persistent_own_pairplan_early r4_n64b4_persistent_own_pairplan_early"
K=r4_n64b5_persistent_own_pairplan,r4_n64b4_persistent_own_pairplan
check_and_time own_early "$NEW" $K 32x32x512x128c,8x32x512x128c
