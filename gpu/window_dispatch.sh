#!/bin/bash
# The Gluon kernel's window families (~8 min on an H200, each step capped): the sweep the table's "windows" are
# built from (gpu/gluon_window.py sweep), the windowless configs the table may choose that next_window.sh did not
# re-check against fp64 (gpu/gluon_check.py check), and the Gluon dispatch's GPU tests (windowed plans included).
# Results under $OUT: window.log, sweep.log, gluon_window_sweep.csv, gluon.tgz (check CSVs), pytest.log
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; } 2>&1 | tee $OUT/window.log
timeout -k 10 200 python3 gpu/gluon_window.py sweep $OUT 170 > $OUT/sweep.log 2>&1 || status=1
tail -4 $OUT/sweep.log | tee -a $OUT/window.log
echo "[${SECONDS}s] window sweep" | tee -a $OUT/window.log
mkdir -p $OUT/gluon
for config in "4 BLOCK_N=128 NUM_BUFFERS=2 PINGPONG=1" "1 BLOCK_M=64 BLOCK_N=64 NUM_BUFFERS=2 num_warps=4" \
              "1 BLOCK_M=64 BLOCK_N=128 NUM_BUFFERS=2 num_warps=4"; do
  timeout -k 5 75 python3 gpu/gluon_check.py check $OUT/gluon $config > $OUT/gluon/check.log 2>&1 || status=1
  tail -1 $OUT/gluon/check.log | tee -a $OUT/window.log
done
echo "[${SECONDS}s] checks" | tee -a $OUT/window.log
timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider tests/test_gluon_dispatch.py tests/test_plan.py \
  > $OUT/pytest.log 2>&1 || status=1
tail -3 $OUT/pytest.log | tee -a $OUT/window.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/window.log
tar czf /tmp/gluon.tgz -C $OUT gluon && rm -rf $OUT/gluon && mv /tmp/gluon.tgz $OUT/   # <= 8 files come back
exit $status
