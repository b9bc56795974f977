#!/bin/bash
# On the GPU machine (~8 min on an H200): the SCHEDULED persistent Gluon configs (r4_n64b3_pingpong_scheduled,
# r4_n128b2_pingpong_scheduled) against fp64 -- gpu/gluon_check.py's 96 cases each and gpu/gluon_window.py's
# 12 window cases, the three checks side by side (<= 220 s) -- then, if all passed, gpu/scheduled_ab.py (the window
# problem and the causal headline shapes in interleaved rounds beside fa2.attention, FlexAttention / cuDNN and
# the other persistent configs; <= 280 s). Results under $OUT: scheduled.log, gluon_check_*.csv,
# gluon_window_check.csv, scheduled_ab.csv
source gpu/env.sh || exit 1
SECONDS=0
G=$OUT/gluon
mkdir -p $G
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/scheduled.log
S="PINGPONG=1 PERSISTENT=1 SCHEDULED=1 PRODUCER_REGS=32"
timeout -k 5 220 python3 gpu/gluon_check.py check $G 4 BLOCK_N=64 NUM_BUFFERS=3 $S > $G/check64.log 2>&1 &
p1=$!
timeout -k 5 220 python3 gpu/gluon_check.py check $G 4 BLOCK_N=128 NUM_BUFFERS=2 $S > $G/check128.log 2>&1 &
p2=$!
timeout -k 5 220 python3 gpu/gluon_window.py $G 200 r4_n64b3_pingpong_scheduled,r4_n128b2_pingpong_scheduled \
  > $G/window.log 2>&1 &
p3=$!
wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?
tail -1 $G/check64.log | tee -a $OUT/scheduled.log
tail -1 $G/check128.log | tee -a $OUT/scheduled.log
grep "passed every case" $G/window.log | tee -a $OUT/scheduled.log
cp $G/gluon_check_*.csv $G/gluon_window_check.csv $OUT/ 2>/dev/null
echo "[${SECONDS}s] checks rc $r1 $r2 $r3" | tee -a $OUT/scheduled.log
status=0
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && grep "passed every case" $G/window.log | grep -q "r4_n128b2_pingpong_scheduled"; then
  timeout -k 5 280 python3 gpu/scheduled_ab.py $OUT 5 > $G/ab.log 2>&1 || status=1
  grep -v "^running" $G/ab.log | tail -40 | tee -a $OUT/scheduled.log
else
  status=1
fi
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/scheduled.log
exit $status
