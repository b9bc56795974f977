#!/bin/bash
# On an H200 (~6 min, each step capped): the decode family for chapter 9 with fa2.decode's final launch rule
# (PDL from 8 splits), chapter 9 executed on it, then two Gluon configs of gluon_sweep.py against fp64.
# Results under $OUT: decode.log, nb09.tgz (book/09_flash_decoding.ipynb, book/results/decode.{csv,png}),
# gluon/ (gluon_check_*.csv/log), final_a.log
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/final_a.log
timeout -k 10 160 python3 -m fa2.bench --sweep decode --no-tune --providers copy,fa2,sdpa_flash,sdpa_cudnn \
  --out book/results > $OUT/decode.log 2>&1 || status=1
grep -v -E "Warning|it/s|input sets" $OUT/decode.log | tail -30 | tee -a $OUT/final_a.log
echo "[${SECONDS}s] decode family" | tee -a $OUT/final_a.log
timeout -k 10 150 python3 gpu/execute_notebooks.py 09_flash_decoding 2>&1 | tail -3 | tee -a $OUT/final_a.log
tar czf $OUT/nb09.tgz book/09_flash_decoding.ipynb book/results/decode.csv book/results/decode.png
echo "[${SECONDS}s] chapter 9" | tee -a $OUT/final_a.log
mkdir -p $OUT/gluon
timeout -k 5 90 python3 gpu/gluon_check.py check $OUT/gluon 4 BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 \
  > $OUT/gluon/check_r4.log 2>&1 || status=1
tail -1 $OUT/gluon/check_r4.log | tee -a $OUT/final_a.log
timeout -k 5 55 python3 gpu/gluon_check.py check $OUT/gluon 1 BLOCK_M=64 BLOCK_N=128 NUM_BUFFERS=2 num_warps=4 \
  > $OUT/gluon/check_r1.log 2>&1 || status=1
tail -1 $OUT/gluon/check_r1.log | tee -a $OUT/final_a.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/final_a.log
exit $status
