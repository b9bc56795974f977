#!/bin/bash
# On the GPU machine: new Gluon candidates checked, then timed (chapter 12, §12.11).
#   bash gpu/check_then_ab.sh TAG WINDOW_NAMES TIMED_NAMES "NAME: KEY=VALUE ..." ...
# gpu/gluon_check.py's 96 fp64 cases for each NAME (rung 4 with its KEY=VALUE overrides) and gpu/gluon_window.py's
# 12 window cases for the comma list WINDOW_NAMES, side by side (<= 230 s); then gpu/money_ab.py: the money shot and
# (1, 32, 8192, 128) in 5 interleaved rounds, TIMED_NAMES and every NAME that passed beside chapter 6's kernel, the
# shipped choice and cuDNN. Results under $OUT: TAG.log, gluon_check.csv, gluon_resources.csv,
# gluon_window_check.csv, TAG_ab.csv
source gpu/env.sh || exit 1
SECONDS=0
TAG=$1 W=$2 K=$3
shift 3
G=/tmp/gluon
mkdir -p $G
LOG=$OUT/$TAG.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $LOG
declare -A PID
for spec in "$@"; do
  name=${spec%%:*}
  timeout -k 5 230 python3 gpu/gluon_check.py check $G 4 ${spec#*:} > $G/check_$name.log 2>&1 &
  PID[$name]=$!
done
timeout -k 5 230 python3 gpu/gluon_window.py $G 210 $W > $G/window.log 2>&1 &
pw=$!
for spec in "$@"; do
  name=${spec%%:*}
  wait ${PID[$name]}; rc=$?
  echo "$name: check rc $rc, $(tail -1 $G/check_$name.log)" | tee -a $LOG
  [ $rc -eq 0 ] && K=$K,$name
done
wait $pw
grep "passed every case" $G/window.log | tee -a $LOG
grep -h "fail\|Error" $G/check_*.log $G/window.log | head -5 | tee -a $LOG
python3 gpu/gluon_check.py summary $G > /dev/null 2>&1
cp $G/gluon_check.csv $G/gluon_resources.csv $G/gluon_window_check.csv $OUT/ 2>/dev/null
echo "[${SECONDS}s] timing: $K" | tee -a $LOG
timeout -k 5 240 python3 gpu/money_ab.py $G 5 $K > $G/ab.log 2>&1
status=$?
cp $G/money_ab.csv $OUT/${TAG}_ab.csv
tail -30 $G/ab.log | tee -a $LOG
echo "[${SECONDS}s] done, status $status" | tee -a $LOG
exit $status
