#!/bin/bash
# SHARED_ITEM's kernel code and candidates are in commit ad98890 only (removed after these runs:
# book/results/shared_item.md); check it out to run this.
# On the GPU machine (~7 min on an H200): the SHARED_ITEM candidates after their first check (gpu/shared_item.sh)
# stopped with an illegal memory access at D = 64, one key (300 x 1, not causal), after five D = 64 shapes ran:
#  1. gpu/gluon_check.py's cases at D = 128 only (GLUON_CHECK_D=128: 48 cases a candidate), bf16 and fp16.
#  2. For those that pass: two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and
#     (8, 32, 512, 128) causal bf16 beside the same configs without SHARED_ITEM, the table's choices there,
#     chapter 6's kernel and cuDNN.
# Results under $OUT: shared_item2.log, gluon_check.csv, gluon_resources.csv, shared_item2_ab_{1,2}.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
start_log shared_item2
NEW="r4_n64b5_persistent_own_pairplan_shared r4_n64b5_persistent_own_shared"
export GLUON_CHECK_D=128
check_named 200 $NEW
unset GLUON_CHECK_D
K=r4_n64b5_persistent_own_pairplan,r4_n64b5_persistent_own,r3_m64n64b2_persistent_split_x2
for name in $PASSED; do K=$K,$name; done
echo "[${SECONDS}s] timing: $K" | tee -a $LOG
ab_twice shared_item2 130 $K 32x32x512x128c,8x32x512x128c
