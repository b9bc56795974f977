#!/bin/bash
# SHARED_ITEM's kernel code and candidates are in commit ad98890 only (removed after these runs:
# book/results/shared_item.md); check it out to run this.
# On the GPU machine (~4 min): gpu/shared_item_probe.py for both SHARED_ITEM candidates (one process each), then
# one run of gpu/money_ab.py (3 interleaved rounds) with them beside the configs without SHARED_ITEM at the two
# N = 512 causal shapes: timing only (the candidates failed cases of gluon_check.py; nothing here ships).
# Results under $OUT: shared_item3.log, shared_item3_ab.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
start_log shared_item3
for name in r4_n64b5_persistent_own_shared r4_n64b5_persistent_own_pairplan_shared; do
  timeout -k 5 120 python3 gpu/shared_item_probe.py $name 2>&1 | grep -v Warn | tail -20 | tee -a $LOG
done
K=r4_n64b5_persistent_own_pairplan,r4_n64b5_persistent_own,r4_n64b5_persistent_own_shared,r4_n64b5_persistent_own_pairplan_shared
mkdir -p /tmp/ab3
timeout -k 5 150 python3 gpu/money_ab.py /tmp/ab3 3 $K 32x32x512x128c,8x32x512x128c > /tmp/ab3.log 2>&1
echo "[${SECONDS}s] timing rc $?" | tee -a $LOG
cp /tmp/ab3/money_ab.csv $OUT/shared_item3_ab.csv
