#!/bin/bash
# On the GPU machine (~8 min on an H200): rung 4 with OWN_RANGES (each consumer attends to its own rows' key range)
# one program per tile, persistent (paired units) and SCHEDULED -- gpu/gluon_check.py's 96 fp64 cases each and
# gpu/gluon_window.py's 12 window cases, side by side (<= 230 s) -- then, for the configs that passed,
# gpu/scheduled_ab.py: the window problem and the causal headline shapes in 5 interleaved rounds beside the shipped
# choices and their peers (<= 200 s). Results under $OUT: own.log, gluon_check_*.csv, gluon_window_check.csv,
# own_ranges_ab.csv
source gpu/env.sh || exit 1
SECONDS=0
G=$OUT/gluon
mkdir -p $G
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/own.log
C="BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1"
timeout -k 5 230 python3 gpu/gluon_check.py check $G 4 $C OWN_RANGES=1 > $G/check1.log 2>&1 &
p1=$!
timeout -k 5 230 python3 gpu/gluon_check.py check $G 4 $C PERSISTENT=1 PRODUCER_REGS=32 OWN_RANGES=1 \
  > $G/check2.log 2>&1 &
p2=$!
timeout -k 5 230 python3 gpu/gluon_check.py check $G 4 $C PERSISTENT=1 SCHEDULED=1 PRODUCER_REGS=32 OWN_RANGES=1 \
  > $G/check3.log 2>&1 &
p3=$!
timeout -k 5 230 python3 gpu/gluon_window.py $G 210 \
  r4_n64b3_pingpong_own,r4_n64b3_pingpong_persistent_own,r4_n64b3_pingpong_scheduled_own > $G/window.log 2>&1 &
p4=$!
wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?; wait $p4
for f in check1 check2 check3; do tail -1 $G/$f.log | tee -a $OUT/own.log; done
grep "passed every case" $G/window.log | tee -a $OUT/own.log
grep -h "fail\|Error" $G/check*.log $G/window.log | head -5 | tee -a $OUT/own.log
cp $G/gluon_check_*.csv $G/gluon_window_check.csv $OUT/ 2>/dev/null
echo "[${SECONDS}s] checks rc $r1 $r2 $r3" | tee -a $OUT/own.log
passed=$(grep "passed every case" $G/window.log)
W=r4_n128b2_pingpong_scheduled,r4_n64b3_pingpong_scheduled
K=r4_n64b3_pingpong_persistent
[ $r1 -eq 0 ] && [[ $passed == *"'r4_n64b3_pingpong_own'"* ]] && W=$W,r4_n64b3_pingpong_own && K=$K,r4_n64b3_pingpong_own
[ $r2 -eq 0 ] && [[ $passed == *"'r4_n64b3_pingpong_persistent_own'"* ]] && K=$K,r4_n64b3_pingpong_persistent_own
[ $r3 -eq 0 ] && [[ $passed == *"'r4_n64b3_pingpong_scheduled_own'"* ]] && W=$W,r4_n64b3_pingpong_scheduled_own \
  && K=$K,r4_n64b3_pingpong_scheduled_own
echo "timing: window $W; causal $K" | tee -a $OUT/own.log
timeout -k 5 200 python3 gpu/scheduled_ab.py $OUT 5 $W $K own_ranges_ab.csv > $G/ab.log 2>&1
status=$?
grep -v "^running" $G/ab.log | tail -40 | tee -a $OUT/own.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/own.log
exit $status
