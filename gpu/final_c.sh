#!/bin/bash
# On an H200 (~7 min, each step capped): chapter 9's kernel with interleaved splits (split s takes tiles s, s+S, ...)
# -- tests/test_decode.py on the GPU, the decode family for book/results/decode.csv, chapter 9 executed on it.
# Results under $OUT: final_c.log, decode_pytest.log, decode.log, nb09.tgz (book/09_flash_decoding.ipynb,
# book/results/decode.{csv,png})
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/final_c.log
timeout -k 10 120 python3 -m pytest tests/test_decode.py -o addopts="" -q -p no:cacheprovider \
  -W ignore::DeprecationWarning > $OUT/decode_pytest.log 2>&1 || status=1
tail -3 $OUT/decode_pytest.log | tee -a $OUT/final_c.log
echo "[${SECONDS}s] decode tests" | tee -a $OUT/final_c.log
timeout -k 10 170 python3 -m fa2.bench --sweep decode --no-tune --providers copy,fa2,sdpa_flash,sdpa_cudnn \
  --out book/results > $OUT/decode.log 2>&1 || status=1
grep -v -E "Warning|it/s|input sets" $OUT/decode.log | tail -30 | tee -a $OUT/final_c.log
echo "[${SECONDS}s] decode family" | tee -a $OUT/final_c.log
timeout -k 10 150 python3 gpu/execute_notebooks.py 09_flash_decoding 2>&1 | tail -3 | tee -a $OUT/final_c.log
tar czf $OUT/nb09.tgz book/09_flash_decoding.ipynb book/results/decode.csv book/results/decode.png
echo "[${SECONDS}s] chapter 9, status $status" | tee -a $OUT/final_c.log
exit $status
