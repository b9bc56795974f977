#!/bin/bash
# On the GPU machine (~7 min on an H200): Q_AHEAD (chapter 12 §12.11: two Q buffers per consumer, the next item's Q
# loaded a whole item ahead) checked, then timed.
#  1. gpu/gluon_check.py's 96 fp64 cases for each *_qahead candidate of fa2/gluon/candidates.py, side by side.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (8, 32, 2048, 128), (1, 32, 8192, 128) and
#     (32, 32, 512, 128) causal: the candidates that passed beside the same configs without Q_AHEAD, chapter 6's
#     kernel, the shipped choice and cuDNN.
# Results under $OUT: qahead.log, gluon_check.csv, gluon_resources.csv, qahead_ab_1.csv, qahead_ab_2.csv
source gpu/env.sh || exit 1
SECONDS=0
NEW="r4_n128b2_pingpong_persistent_split_qahead r4_n128b2_pingpong_scheduled_split_qahead r4_n64b3_pingpong_persistent_own_qahead"
K=r4_n128b2_pingpong_persistent_split,r4_n128b2_pingpong_scheduled_split,r4_n64b3_pingpong_persistent_own
source gpu/candidates.sh
start_log qahead
check_named 240 $NEW
for name in $PASSED; do K=$K,$name; done
echo "[${SECONDS}s] timing: $K" | tee -a $LOG
ab_twice qahead 150 $K 8x32x2048x128c,1x32x8192x128c,32x32x512x128c
