#!/bin/bash
# On the GPU machine: the reference sweep (96 shapes) in 3 interleaved rounds, in two calls of < 10 min each:
#   bash gpu/reference3.sh a     # N <= 2048 -> $OUT/reference_a.csv (~4 min)
#   bash gpu/reference3.sh b     # N >= 8192 -> $OUT/reference_b.csv (~7 min)
# Providers: fa2, fa2_ch6 (chapter 6's kernel, no Gluon dispatch), SDPA FLASH and cuDNN, as gpu/sweeps.sh.
# Join the two CSVs into book/results/reference.csv and draw the plot with `python -m fa2.bench --from-csv`.
source gpu/env.sh || exit 1
case $1 in
  a) range="--max-n 2048" ;;
  b) range="--min-n 8192" ;;
  *) echo "usage: bash gpu/reference3.sh a|b"; exit 2 ;;
esac
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  > $OUT/reference_$1.log 2>&1
timeout -k 10 570 python3 -m fa2.bench --sweep reference $range --rounds 3 --providers fa2,fa2_ch6,sdpa_flash,sdpa_cudnn \
  --name reference_$1 --no-plot --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" >> $OUT/reference_$1.log
status=${PIPESTATUS[0]}
echo "[$SECONDS s] status $status" | tee -a $OUT/reference_$1.log
tail -25 $OUT/reference_$1.log
exit $status
