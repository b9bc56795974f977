#!/bin/bash
# On the GPU machine (~4.5 min on an H200): after the Gluon table took HALF_DIAGONAL's interleaved rounds (the money
# shot runs r4_n128b2_pingpong_persistent_split_half), the money sweep twice (as gpu/sweeps.sh does) and chapter 12's
# dispatch cell re-run (carry `.whl`), then the headline sweep (3 interleaved rounds). Results under $OUT: money.csv,
# money.png, money_run2.csv, headline.csv, headline.png, sweeps.log, chapter12.tgz
source gpu/env.sh || exit 1
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  > $OUT/sweeps.log 2>&1
timeout -k 5 50 python3 -m fa2.bench --sweep money --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" >> $OUT/sweeps.log
echo "[$SECONDS s] money" | tee -a $OUT/sweeps.log
timeout -k 5 40 python3 -m fa2.bench --sweep money --name money_run2 --no-plot --out $OUT 2>&1 \
  | grep -v -E "Warning|it/s|run/s" >> $OUT/sweeps.log
echo "[$SECONDS s] money_run2" | tee -a $OUT/sweeps.log
(cd book && timeout -k 5 35 python3 ../gpu/rerun_cells.py 12_gluon_hopper.ipynb 1,2 50,52) > $OUT/rerun.log 2>&1
echo "[$SECONDS s] rerun $?" | tee -a $OUT/sweeps.log
tar czf $OUT/chapter12.tgz book/12_gluon_hopper.ipynb
timeout -k 10 170 python3 -m fa2.bench --sweep headline --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" >> $OUT/sweeps.log
echo "[$SECONDS s] headline" | tee -a $OUT/sweeps.log
grep -E "fa2|cuDNN|FLASH|geometric" $OUT/sweeps.log | head -40
