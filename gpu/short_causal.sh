#!/bin/bash
# On the GPU machine (~8 min on an H200): rungs 1-2 on 128-row tiles for short causal sequences, and host against
# GPU time at N = 512.
#  1. gpu/gluon_check.py's 96 fp64 cases for each candidate named below (rung and KEY=VALUE from
#     fa2/gluon/candidates.py), side by side (<= 240 s).
#  2. gpu/money_ab.py: 5 interleaved rounds at (32, 32, 512, 128) causal (the headline shape furthest behind cuDNN),
#     (8, 32, 512, 128) causal and (1, 16, 16384, 64) non-causal, bf16: the candidates that passed beside the
#     shipped table's choice (r1_m128n64b2w4 at the first two), chapter 6's kernel and cuDNN.
#  3. gpu/tiny_host.py: bench / GPU-only / host time per call at the N = 512 shapes, 3 interleaved rounds.
# Results under $OUT: short_causal.log, gluon_check.csv, gluon_resources.csv, short_causal_ab.csv, tiny_host.csv
source gpu/env.sh || exit 1
SECONDS=0
NEW="r1_m128n64b2w8 r2_m64n64b2w4 r2_m64n128b2w4 r2_m128n64b2w4 r2_m128n64b2w8 r2_m128n64b2w8r128"
K=r1_m128n64b2w4,r1_m64n128b2w4,r4_n128b3_pingpong
source gpu/candidates.sh
start_log short_causal
check_named 240 $NEW
for name in $PASSED; do K=$K,$name; done
echo "[${SECONDS}s] timing: $K" | tee -a $LOG
timeout -k 5 200 python3 gpu/money_ab.py $G 5 $K 32x32x512x128c,8x32x512x128c,1x16x16384x64f > $G/ab.log 2>&1
echo "[${SECONDS}s] money_ab status $?" | tee -a $LOG
cp $G/money_ab.csv $OUT/short_causal_ab.csv
timeout -k 5 150 python3 gpu/tiny_host.py $OUT 3 > $G/tiny.log 2>&1
echo "[${SECONDS}s] tiny_host status $?" | tee -a $LOG
tail -3 $G/tiny.log | tee -a $LOG
