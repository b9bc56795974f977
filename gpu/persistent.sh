#!/bin/bash
# The Gluon kernel's PERSISTENT schedule (rung 4, one program per SM looping over the query tiles) on an H200
# (~5 min, each step capped): against fp64 (gpu/gluon_check.py check, 96 cases), then timed on the headline sweep
# beside the same config without PERSISTENT, chapter 6's kernel, SDPA FLASH and cuDNN (gpu/gluon_check.py bench),
# then with a window (gpu/gluon_window.py: 12 window cases against fp64, the 32k window problem timed).
# Results under $OUT: persistent.log, gluon.tgz (every CSV and log)
source gpu/env.sh || exit 1
SECONDS=0
status=0
G=$OUT/gluon
mkdir -p $G
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee $OUT/persistent.log
P3="BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32"
P2="BLOCK_N=64 NUM_BUFFERS=2 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32"
passed=""
i=0
for p in "$P3"; do
  i=$((i + 1))
  timeout -k 5 90 python3 gpu/gluon_check.py check $G 4 $p > $G/check_$i.log 2>&1
  rc=$?
  tail -1 $G/check_$i.log | tee -a $OUT/persistent.log
  if [ $rc -eq 0 ]; then passed+="$i "; ok[$i]="$p"; else status=1; grep '^running' $G/check_$i.log | tail -1 \
    | tee -a $OUT/persistent.log; fi
  echo "[${SECONDS}s] checked $p (rc $rc)" | tee -a $OUT/persistent.log
done
for i in 1; do
  [ -n "${ok[$i]}" ] || continue
  timeout -k 5 40 python3 gpu/gluon_check.py bench $G r4 ${ok[$i]} 2>&1 | grep -v Warning | tail -12 | tee -a $OUT/persistent.log
  echo "[${SECONDS}s] timed ${ok[$i]}" | tee -a $OUT/persistent.log
done
timeout -k 5 40 python3 gpu/gluon_check.py bench $G r4 BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 2>&1 | grep -v Warning \
  | tail -12 | tee -a $OUT/persistent.log
timeout -k 5 50 python3 gpu/gluon_check.py bench $G peers 2>&1 | grep -v Warning | tail -12 | tee -a $OUT/persistent.log
python3 gpu/gluon_check.py summary $G > $G/summary.log 2>&1
grep -A30 "bench\|best" $G/summary.log | tail -25 | tee -a $OUT/persistent.log
echo "[${SECONDS}s] headline timed" | tee -a $OUT/persistent.log
if [ -n "$passed" ]; then
  timeout -k 10 120 python3 gpu/gluon_window.py $G/window 80 r4_n64b3_pingpong,r4_n64b3_pingpong_persistent \
    > $G/window.log 2>&1 || status=1
  grep -E "passed every|TFLOP/s|fail" $G/window.log | tail -12 | tee -a $OUT/persistent.log
fi
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/persistent.log
tar czf /tmp/gluon.tgz -C $OUT gluon && rm -rf $G && mv /tmp/gluon.tgz $OUT/
exit $status
