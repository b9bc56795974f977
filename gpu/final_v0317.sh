#!/bin/bash
# On the GPU machine (~6 min on an H200), with 0.3.17's final Gluon table: the reference sweep's N <= 2048 half in 3
# interleaved rounds (gpu/reference3.sh a), then the headline sweep (3 interleaved rounds, every peer; capped).
# NAME (default headline_v0317) names the headline sweep's files (gpu/rerun_v0317.sh sets it).
# Results under $OUT: reference_a.csv, reference_a.log, $NAME.csv, $NAME.log
source gpu/env.sh || exit 1
NAME=${NAME:-headline_v0317}
bash gpu/reference3.sh a > /dev/null 2>&1
echo "[$SECONDS s] reference a done" | tee $OUT/$NAME.log
timeout -k 5 190 python3 -m fa2.bench --sweep headline --no-plot --name $NAME --out $OUT 2>&1 \
  | grep -v -E "Warning|it/s|run/s" >> $OUT/$NAME.log
echo "[$SECONDS s] status ${PIPESTATUS[0]}" | tee -a $OUT/$NAME.log
tail -22 $OUT/$NAME.log
