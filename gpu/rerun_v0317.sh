#!/bin/bash
# On the GPU machine (~6 min on an H200), with release 0.3.17's table unchanged: a third run of the reference
# sweep's N <= 2048 half (gpu/reference3.sh a, 3 interleaved rounds) and a fifth headline sweep (3 interleaved
# rounds, every peer; capped), to see how far the shapes closest to cuDNN move from run to run.
# Results under $OUT: reference_a.csv, reference_a.log, headline_v0317_run5.csv, headline_v0317_run5.log
# (committed as book/results/reference_a_v0317_run3.csv and book/results/headline_v0317_run5.csv)
source gpu/env.sh || exit 1
bash gpu/reference3.sh a > /dev/null 2>&1
echo "[$SECONDS s] reference a done" | tee $OUT/headline_v0317_run5.log
timeout -k 5 190 python3 -m fa2.bench --sweep headline --no-plot --name headline_v0317_run5 --out $OUT 2>&1 \
  | grep -v -E "Warning|it/s|run/s" >> $OUT/headline_v0317_run5.log
echo "[$SECONDS s] status ${PIPESTATUS[0]}" | tee -a $OUT/headline_v0317_run5.log
tail -22 $OUT/headline_v0317_run5.log
