#!/bin/bash
# On the GPU machine (~7 min on an H200), with the Gluon table that runs rung 3 at two programs per SM
# (r3_m64n64b2_persistent_split_x2) at (8, 32, 512, 128) causal and the 5-deep 64-key ring at (32, 32, 512, 128)
# causal fp16:
#  1. gpu/money_ab.py (5 interleaved rounds) at the unmeasured shapes those families now cover -- N = 1024 (as near
#     the N = 512 family as the N = 2048 one) and B*H = 128 and 512 (as near B*H = 256 as their other
#     neighbours), bf16 and fp16 -- with fa2.attention (the new table), both configs and cuDNN.
#  2. tests/test_gluon_dispatch.py's GPU cases of the two-per-SM candidates (fp64, every launch path). (In the
#     committed run, book/results/gluon_x2_table.log, this step stopped at pyproject's addopts, which name plugins
#     the GPU image lacks; gpu/x2_neighbours.sh ran it, and so does this script now, as gpu/checks.sh does.)
#  3. The reference sweep's N <= 2048 half in 3 interleaved rounds (gpu/reference3.sh a).
# Results under $OUT: x2_table.log, x2_neighbours_ab.csv, reference_a.csv, reference_a.log
source gpu/env.sh || exit 1
SECONDS=0
LOG=$OUT/x2_table.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $LOG
mkdir -p /tmp/nb
timeout -k 5 120 python3 gpu/money_ab.py /tmp/nb 5 r3_m64n64b2_persistent_split_x2,r4_n64b5_persistent_own_pairplan \
  8x32x1024x128c,4x32x512x128c,16x32x512x128c,8x32x1024x128ch,16x32x512x128ch > /tmp/nb.log 2>&1
echo "[${SECONDS}s] neighbours rc $?" | tee -a $LOG
cp /tmp/nb/money_ab.csv $OUT/x2_neighbours_ab.csv
timeout -k 5 100 python3 -m pytest -o addopts="" -q -p no:cacheprovider -x tests/test_gluon_dispatch.py \
  -k "on_gpu and x2" 2>&1 | tail -3 | tee -a $LOG
echo "[${SECONDS}s] pytest done" | tee -a $LOG
bash gpu/reference3.sh a 2>&1 | tail -3 | tee -a $LOG
echo "[${SECONDS}s] done" | tee -a $LOG
