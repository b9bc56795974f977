#!/bin/bash
# On the GPU machine (~6 min on an H200): SPLIT_EMPTY (K and V freed to the producer separately, K loaded a step
# ahead of V; chapter 12 §12.12) -- gpu/gluon_check.py's 96 fp64 cases for each candidate and gpu/gluon_window.py's
# 12 window cases, side by side (<= 230 s) -- then gpu/money_ab.py: the money shot and (1, 32, 8192, 128) in 5
# interleaved rounds, the candidates that passed beside the shipped choice, r4_n128b3_pingpong and cuDNN.
# Results under $OUT: split.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, split_ab.csv
source gpu/env.sh || exit 1
SECONDS=0
G=/tmp/gluon
mkdir -p $G
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/split.log
P="PINGPONG=1 SPLIT_EMPTY=1"
declare -A CFG=(
  [r4_n128b2_pingpong_persistent_split]="BLOCK_N=128 NUM_BUFFERS=2 $P PERSISTENT=1 PRODUCER_REGS=32"
  [r4_n128b2_pingpong_scheduled_split]="BLOCK_N=128 NUM_BUFFERS=2 $P PERSISTENT=1 PRODUCER_REGS=32 SCHEDULED=1"
  [r4_n128b2_pingpong_split]="BLOCK_N=128 NUM_BUFFERS=2 $P"
  [r4_n128b3_pingpong_split]="BLOCK_N=128 NUM_BUFFERS=3 $P"
  [r4_n64b3_pingpong_persistent_own_split]="BLOCK_N=64 NUM_BUFFERS=3 $P PERSISTENT=1 PRODUCER_REGS=32 OWN_RANGES=1"
)
declare -A PID
for name in "${!CFG[@]}"; do
  timeout -k 5 230 python3 gpu/gluon_check.py check $G 4 ${CFG[$name]} > $G/check_$name.log 2>&1 &
  PID[$name]=$!
done
W=r4_n128b2_pingpong_persistent_split,r4_n128b3_pingpong_split,r4_n64b3_pingpong_persistent_own_split
W=$W,r4_n128b3_pingpong,r4_n64b3_pingpong_persistent_own_qregs
timeout -k 5 230 python3 gpu/gluon_window.py $G 210 $W > $G/window.log 2>&1 &
pw=$!
K=r4_n128b3_pingpong
for name in "${!CFG[@]}"; do
  wait ${PID[$name]}; rc=$?
  echo "$name: check rc $rc, $(tail -1 $G/check_$name.log)" | tee -a $OUT/split.log
  [ $rc -eq 0 ] && K=$K,$name
done
wait $pw
grep "passed every case" $G/window.log | tee -a $OUT/split.log
grep -h "fail\|Error" $G/check_*.log $G/window.log | head -5 | tee -a $OUT/split.log
python3 gpu/gluon_check.py summary $G > /dev/null 2>&1
cp $G/gluon_check.csv $G/gluon_resources.csv $G/gluon_window_check.csv $OUT/ 2>/dev/null
echo "[${SECONDS}s] timing: $K" | tee -a $OUT/split.log
timeout -k 5 240 python3 gpu/money_ab.py $G 5 $K > $G/ab.log 2>&1
status=$?
cp $G/money_ab.csv $OUT/split_ab.csv
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/split.log
exit $status
