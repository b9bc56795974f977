#!/bin/bash
# On the GPU machine (~4 min on an H200), after gpu/final_round4.sh, whose headline sweep ran out of its 60 s (the
# new configs' first compiles) and whose profile went to profile_metrics.csv: the headline sweep again with more
# time, the 24 reference shapes with N = 512 in 3 interleaved rounds (fa2, chapter 6's kernel, cuDNN: the one-round
# sweep timed fa2 2x slower than chapter 6's kernel at (1, 16, 512, 64) fp16 causal, a 12 us shape), and Nsight
# Compute's gluon study. Results under $OUT: headline.{csv,png}, reference_n512.csv, profile_gluon.csv, final_b.log
set -o pipefail
source gpu/env.sh || exit 1
SECONDS=0
timeout -k 10 150 python3 -m fa2.bench --sweep headline --out $OUT 2>&1 | grep -v -E "Warning|it/s" > $OUT/final_b.log
echo "[${SECONDS}s] headline rc $?" | tee -a $OUT/final_b.log
timeout -k 10 100 python3 -m fa2.bench --sweep reference --max-n 512 --rounds 3 --providers fa2,fa2_ch6,sdpa_cudnn \
  --name reference_n512 --no-plot --out $OUT 2>&1 | grep -v -E "Warning|it/s" >> $OUT/final_b.log
echo "[${SECONDS}s] reference N=512 rc $?" | tee -a $OUT/final_b.log
timeout -k 10 120 python3 -m fa2.profile --out /tmp/profile --studies gluon --budget-s 90 > /tmp/profile.log 2>&1
echo "[${SECONDS}s] profile rc $?" | tee -a $OUT/final_b.log
tail -8 /tmp/profile.log >> $OUT/final_b.log
cp /tmp/profile/profile_metrics.csv $OUT/profile_gluon.csv
