#!/bin/bash
# On the GPU machine (~5 min on an H200): TABLE_AHEAD (chapter 12 §12.11: a SCHEDULED program reads each work item's
# table entry an item ahead, so no read of the table is on its path) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each *_ahead candidate of fa2/gluon/candidates.py, and
#     gpu/gluon_window.py's 12 window cases for them, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (8, 32, 2048, 128), (1, 32, 8192, 128) and
#     (32, 32, 512, 128) causal: the candidates that passed both beside the same configs without it, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: table_ahead.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, table_ahead_ab_1.csv,
# table_ahead_ab_2.csv
source gpu/env.sh || exit 1
SECONDS=0
NEW="r4_n128b2_pingpong_scheduled_split_half_ahead r4_n128b2_pingpong_scheduled_split_ahead r4_n64b3_pingpong_scheduled_ahead"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_pingpong_scheduled_split_half,r4_n128b2_pingpong_scheduled_split,r4_n64b3_pingpong_scheduled
G=/tmp/gluon
mkdir -p $G
LOG=$OUT/table_ahead.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $LOG
timeout -k 5 200 python3 gpu/gluon_window.py $G 180 ${NEW// /,} > $G/window.log 2>&1 &
pw=$!
source gpu/candidates.sh
check_named 200 $NEW
wait $pw
grep "passed every case" $G/window.log | tee -a $LOG
for name in $PASSED; do
  grep "passed every case" $G/window.log | grep -q "'$name'" && K=$K,$name
done
grep -h "fail\|Error" $G/window.log | head -5 | tee -a $LOG
cp $G/gluon_window_check.csv $OUT/ 2>/dev/null
echo "[${SECONDS}s] timing: $K" | tee -a $LOG
ab_twice table_ahead 100 $K 8x32x2048x128c,1x32x8192x128c,32x32x512x128c
