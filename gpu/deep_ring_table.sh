#!/bin/bash
# On the GPU machine (~6 min on an H200): the two short causal shapes where a deeper 64-key ring won
# (gpu/deep_ring.sh), decided by two fresh runs of interleaved rounds that time the table's current choice beside
# the deep-ring candidates, then the headline sweep with the rebuilt table.
#  1. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 512, 128) bf16 causal:
#     the table's config at each (the persistent 128-key config with the planned last round; rung 1, 64 x 64), the
#     64-key persistent configs with own key ranges and 3, 4 or 5 K/V buffers (fp64-checked:
#     book/results/gluon_check.csv), chapter 6's kernel and cuDNN.
#  2. The Gluon table rebuilt as before, those two runs --newer (they decide the shapes they timed).
#  3. python -m fa2.bench --sweep headline (3 interleaved rounds) with the rebuilt table.
# Results under $OUT: deep_ring_table.log, gluon_deep_table_ab_1.csv, gluon_deep_table_ab_2.csv,
# NVIDIA_H200.gluon.json, headline.csv, headline.png
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
start_log deep_ring_table
K=r4_n128b2_persistent_split_half_pairplan,r1_m64n64b2w4,r4_n64b3_persistent_own_pairplan
K=$K,r4_n64b4_persistent_own_pairplan,r4_n64b5_persistent_own_pairplan,r4_n64b5_persistent_own
ab_twice gluon_deep_table 150 $K 32x32x512x128c,8x32x512x128c
rebuild_table $OUT/gluon_deep_table_ab_1.csv $OUT/gluon_deep_table_ab_2.csv
echo "[${SECONDS}s] table" | tee -a $LOG
timeout -k 10 220 python3 -m fa2.bench --sweep headline --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" >> $LOG
echo "[${SECONDS}s] headline" | tee -a $LOG
grep -E "fa2|cuDNN|geometric" $LOG | tail -20
