#!/bin/bash
# On the GPU machine (~6 min on an H200), with 0.3.17's final Gluon table: the reference sweep's N <= 2048 half in 3
# interleaved rounds (gpu/reference3.sh a), then the headline sweep (3 interleaved rounds, every peer; capped).
# Results under $OUT: reference_a.csv, reference_a.log, headline_v0317.csv, headline_v0317.log
source gpu/env.sh || exit 1
bash gpu/reference3.sh a > /dev/null 2>&1
echo "[$SECONDS s] reference a done" | tee $OUT/headline_v0317.log
timeout -k 5 190 python3 -m fa2.bench --sweep headline --no-plot --name headline_v0317 --out $OUT 2>&1 \
  | grep -v -E "Warning|it/s|run/s" >> $OUT/headline_v0317.log
echo "[$SECONDS s] status ${PIPESTATUS[0]}" | tee -a $OUT/headline_v0317.log
tail -22 $OUT/headline_v0317.log
