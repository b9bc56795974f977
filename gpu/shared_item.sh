#!/bin/bash
# SHARED_ITEM's kernel code and candidates are in commit ad98890 only (removed after these runs:
# book/results/shared_item.md); check it out to run this.
# On the GPU machine (~8 min on an H200): SHARED_ITEM (chapter 12's appendix on short work items: both of rung 4's
# consumers run their work items through one function that is not inlined, _shared_item, so the item's code is in
# the kernel once and the two consumer warpgroups fetch the same instructions; the producer moves to the default
# partition so that both consumers are workers of the same width).
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 512, 128) and
#     (8, 32, 2048, 128) causal bf16: the candidates that passed beside the same configs without SHARED_ITEM (the
#     table's 64-key ring at (32, 32, 512, 128), with the planned last round and with the paired launch), rung 3 at
#     two programs per SM (the table's at (8, 32, 512, 128)), chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: shared_item.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# shared_item_ab_{1,2}.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n64b5_persistent_own_pairplan_shared r4_n64b5_persistent_own_shared"
K=r4_n64b5_persistent_own_pairplan,r4_n64b5_persistent_own,r3_m64n64b2_persistent_split_x2
check_and_time shared_item "$NEW" $K 32x32x512x128c,8x32x512x128c,8x32x2048x128c 130
