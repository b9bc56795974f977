#!/bin/bash
# Branch persistent-balanced, the next session's first GPU call (~5 min on an H200, each step capped): PERSISTENT with
# causal units of two query tiles (k-th longest + k-th shortest of a head) against fp64 (96 cases), timed over the
# headline sweep beside the same config without it, then with a window: 12 window cases against fp64 and the 32k
# window problem timed beside fa2.attention (the window families' choice) and FlexAttention.
# Results under $OUT: next9.log, gluon.tgz
source gpu/env.sh || exit 1
SECONDS=0
status=0
G=$OUT/gluon
mkdir -p $G
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } 2>&1 \
  | tee $OUT/next9.log
P="BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32"
timeout -k 5 90 python3 gpu/gluon_check.py check $G 4 $P > $G/check.log 2>&1
rc=$?
tail -1 $G/check.log | tee -a $OUT/next9.log
[ $rc -eq 0 ] || { status=1; grep '^running' $G/check.log | tail -1 | tee -a $OUT/next9.log; }
echo "[${SECONDS}s] check rc $rc" | tee -a $OUT/next9.log
if [ $rc -eq 0 ]; then
  timeout -k 5 45 python3 gpu/gluon_check.py bench $G r4 $P > $G/bench_p.log 2>&1 || status=1
  timeout -k 5 45 python3 gpu/gluon_check.py bench $G r4 BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 > $G/bench_n.log 2>&1 \
    || status=1
  python3 gpu/gluon_check.py summary $G > $G/summary.log 2>&1
  grep -A12 "shape (B, H" $G/summary.log | tee -a $OUT/next9.log
  echo "[${SECONDS}s] headline timed" | tee -a $OUT/next9.log
  timeout -k 10 120 python3 gpu/gluon_window.py $G/window 80 r4_n64b3_pingpong,r4_n64b3_pingpong_persistent \
    > $G/window.log 2>&1 || status=1
  grep -E "passed every|TFLOP/s|fail" $G/window.log | tail -8 | tee -a $OUT/next9.log
fi
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/next9.log
tar czf /tmp/gluon.tgz -C $OUT gluon && rm -rf $G && mv /tmp/gluon.tgz $OUT/
exit $status
