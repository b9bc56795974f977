#!/bin/bash
# Branch gluon-window, first GPU call (~9 min on an H200, each step capped): the windowed Gluon kernel against fp64
# and timed (gpu/gluon_window.py), the windowless kernels it changed against fp64 again (gpu/gluon_check.py, the two
# configs the shipped table uses most), and the decode kernel's peeled-first-tile variant beside the shipped one.
# Results under $OUT: next.log, window/ (gluon_window_check.csv, gluon_window.csv), gluon/ (check CSVs and logs),
# strided/ (decode_strided.csv)
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/next.log
mkdir -p $OUT/window $OUT/gluon $OUT/strided
timeout -k 10 240 python3 gpu/gluon_window.py $OUT/window 120 > $OUT/window/log 2>&1 || status=1
grep -E "passed every|TFLOP/s|fail" $OUT/window/log | tail -20 | tee -a $OUT/next.log
echo "[${SECONDS}s] window" | tee -a $OUT/next.log
timeout -k 5 90 python3 gpu/gluon_check.py check $OUT/gluon 4 BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 \
  > $OUT/gluon/check_r4.log 2>&1 || status=1
tail -1 $OUT/gluon/check_r4.log | tee -a $OUT/next.log
timeout -k 5 60 python3 gpu/gluon_check.py check $OUT/gluon 1 BLOCK_M=128 BLOCK_N=64 NUM_BUFFERS=2 num_warps=4 \
  > $OUT/gluon/check_r1.log 2>&1 || status=1
tail -1 $OUT/gluon/check_r1.log | tee -a $OUT/next.log
echo "[${SECONDS}s] windowless checks" | tee -a $OUT/next.log
timeout -k 10 110 python3 gpu/decode_strided.py $OUT/strided 90 strided,first > $OUT/strided/log 2>&1 || status=1
tail -2 $OUT/strided/log | tee -a $OUT/next.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/next.log
exit $status
