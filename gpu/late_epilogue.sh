#!/bin/bash
# On the GPU machine (~6 min on an H200): LATE_EPILOGUE (chapter 12's appendix on short work items: each work item's
# O leaves through its staging buffer and TMA store while the next item's first S = Q·Kᵀ is computed) in the deep
# 64-key rings the table runs at N = 512 causal, with the next Q loaded a whole item ahead (Q_REGS) or before the
# last P·V (Q_EARLY), and Q_REGS alone as the control; checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each candidate, and gpu/gluon_window.py's 12 window cases for them.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 512, 128) causal: the
#     candidates that passed both beside the table's config there, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: late_epilogue.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# late_epilogue_ab_1.csv, late_epilogue_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n64b5_persistent_own_pairplan_qregs r4_n64b5_persistent_own_pairplan_qregs_late"
NEW="$NEW r4_n64b5_persistent_own_pairplan_early_late r4_n64b4_persistent_own_pairplan_qregs_late"
check_and_time late_epilogue "$NEW" r4_n64b5_persistent_own_pairplan 32x32x512x128c,8x32x512x128c
