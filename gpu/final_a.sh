#!/bin/bash
# On an H200 (~2.5 min, each step capped): two Gluon configs of gluon_sweep.py against fp64. (This script also
# ran the decode family and chapter 9 once; gpu/final_c.sh does that now, with chapter 9's interleaved splits.)
# Results under $OUT: gluon/ (gluon_check_*.csv/log), final_a.log
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/final_a.log
mkdir -p $OUT/gluon
timeout -k 5 90 python3 gpu/gluon_check.py check $OUT/gluon 4 BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 \
  > $OUT/gluon/check_r4.log 2>&1 || status=1
tail -1 $OUT/gluon/check_r4.log | tee -a $OUT/final_a.log
timeout -k 5 55 python3 gpu/gluon_check.py check $OUT/gluon 1 BLOCK_M=64 BLOCK_N=128 NUM_BUFFERS=2 num_warps=4 \
  > $OUT/gluon/check_r1.log 2>&1 || status=1
tail -1 $OUT/gluon/check_r1.log | tee -a $OUT/final_a.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/final_a.log
exit $status
