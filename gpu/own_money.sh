#!/bin/bash
# On the GPU machine (~6 min on an H200): the money shot's and (1, 32, 8192, 128)'s Gluon family decided again by two
# fresh runs of gpu/money_ab.py (5 interleaved rounds each) with the persistent configs with and without
# OWN_RANGES; the table rebuilt from them (python -m fa2.gluon.dispatch, the reference run and its confirming runs as
# before, --interleaved the two new runs); then python -m fa2.bench --sweep money and --sweep headline with the
# rebuilt table, and --sweep window once more. Results under $OUT (8 files, what a device call brings back):
# own_money.log, money_ab_own_{1,2}.csv, NVIDIA_H200.gluon.json, money.csv, headline.csv, plots.tgz (the two
# sweeps' plots), window_run4.csv
source gpu/env.sh || exit 1
SECONDS=0
R=book/results
N=r4_n64b3_pingpong_persistent,r4_n64b3_pingpong_persistent_own,r4_n64b3_pingpong_scheduled_own,r4_n128b2_pingpong_persistent
T=$(mktemp -d)                      # everything but the 8 result files stays here
for i in 1 2; do
  mkdir -p $T/ab$i
  (cd gpu && timeout -k 5 150 python3 money_ab.py $T/ab$i 5 $N > $T/ab$i/log 2>&1)
  cp $T/ab$i/money_ab.csv $OUT/money_ab_own_$i.csv
  echo "[${SECONDS}s] money_ab run $i: $(tail -1 $T/ab$i/log)" | tee -a $OUT/own_money.log
done
cp $OUT/money_ab_own_1.csv $OUT/money_ab_own_2.csv $R/
python3 -m fa2.gluon.dispatch $R/gluon_reference.csv fa2/configs/NVIDIA_H200.gluon.json $R/reference_before_gluon.csv \
  $R/headline_before_gluon.csv $R/money_before_gluon.csv $R/money_run2_before_gluon.csv $R/gluon_sweep.csv \
  $R/gluon_ladder_defaults.csv --interleaved $R/money_ab_own_1.csv $R/money_ab_own_2.csv 2>&1 \
  | grep -i "interleaved\|measured shapes" | tee -a $OUT/own_money.log
cp fa2/configs/NVIDIA_H200.gluon.json $OUT/
for s in money headline; do
  timeout -k 5 150 python3 -m fa2.bench --sweep $s --out $T > $T/$s.log 2>&1
  echo "[${SECONDS}s] $s rc $?" | tee -a $OUT/own_money.log
  grep -i "geometric" $T/$s.log | head -4 | tee -a $OUT/own_money.log
  cp $T/$s.csv $OUT/
done
tar czf $OUT/plots.tgz -C $T money.png headline.png
mkdir -p $T/w
timeout -k 5 120 python3 -m fa2.bench --sweep window --out $T/w > $T/w/log 2>&1
cp $T/w/window.csv $OUT/window_run4.csv
grep "fa2 / flex\|plain causal at the same N (TFLOP" $T/w/log | tee -a $OUT/own_money.log
echo "[${SECONDS}s] done" | tee -a $OUT/own_money.log
