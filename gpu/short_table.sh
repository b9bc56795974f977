#!/bin/bash
# On the GPU machine (~4 min on an H200): (32, 32, 512, 128) bf16 causal, the one headline shape under 0.95x cuDNN,
# decided by two fresh runs of interleaved rounds, then the headline sweep with the rebuilt table.
#  1. Two runs of gpu/money_ab.py (5 interleaved rounds) at that shape: the shipped persistent config, the same
#     without ping-pong (also with Q_EARLY, and with SCHEDULED=2's planned last round) and the 64-key persistent
#     config with own key ranges without ping-pong (all fp64-checked: book/results/gluon_check.csv), chapter 6's
#     kernel and cuDNN.
#  2. The Gluon table rebuilt as before, those two runs --newer (they decide the shapes they timed).
#  3. python -m fa2.bench --sweep headline (3 interleaved rounds) with the rebuilt table.
# Results under $OUT: short_table.log, gluon_short_ab_1.csv, gluon_short_ab_2.csv, NVIDIA_H200.gluon.json,
# headline.csv, headline.png
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
start_log short_table
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_persistent_split_half,r4_n128b2_persistent_split_half_early
K=$K,r4_n128b2_persistent_split_half_pairplan,r4_n64b3_persistent_own
ab_twice gluon_short 100 $K 32x32x512x128c
rebuild_table $OUT/gluon_short_ab_1.csv $OUT/gluon_short_ab_2.csv
echo "[${SECONDS}s] table" | tee -a $LOG
timeout -k 10 170 python3 -m fa2.bench --sweep headline --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" >> $LOG
echo "[${SECONDS}s] headline" | tee -a $LOG
grep -E "fa2|cuDNN|geometric" $LOG | tail -20
