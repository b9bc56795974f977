#!/bin/bash
# With the window families in the Gluon table (~5 min on an H200): the window sweep of `python -m fa2.bench` twice
# (run a is book/results/window.csv; run b shows how much one run's numbers move), then the Gluon dispatch's GPU
# tests (windowed plans against fp64 included). Results under $OUT: bench.log, window_a.csv, window_b.csv, pytest.log
source gpu/env.sh || exit 1
SECONDS=0
status=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee $OUT/bench.log
for run in a b; do
  mkdir -p $OUT/$run
  timeout -k 10 120 python3 -m fa2.bench --sweep window --out $OUT/$run > $OUT/$run.log 2>&1 || status=1
  grep -E "TFLOP/s|x |window" $OUT/$run.log | tail -12 | tee -a $OUT/bench.log
  mv $OUT/$run/window.csv $OUT/window_$run.csv; rm -rf $OUT/$run
  echo "[${SECONDS}s] window run $run" | tee -a $OUT/bench.log
done
timeout -k 10 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/test_gluon_dispatch.py tests/test_plan.py \
  > $OUT/pytest.log 2>&1 || status=1
tail -3 $OUT/pytest.log | tee -a $OUT/bench.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/bench.log
exit $status
