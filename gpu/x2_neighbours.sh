#!/bin/bash
# On the GPU machine (~3 min on an H200): two more gpu/money_ab.py runs (5 interleaved rounds) at the shapes between
# the reference sweep's that the two-per-SM family (8, 32, 512, 128) causal would cover by nearness (gpu/x2_table.sh
# made the first): N = 1024 with B*H = 256, and N = 512 with B*H = 128 and 512, bf16 and fp16; fa2.attention (the
# shipped table), chapter 6's kernel, cuDNN, rung 3 at two programs per SM, the 5-deep 64-key ring and the money
# shot's 128-key config. Then tests/test_gluon_dispatch.py's GPU cases of the two-per-SM candidates (fp64, every
# launch path). Results under $OUT: x2_neighbours.log, x2_neighbours_ab_2.csv, x2_neighbours_ab_3.csv
source gpu/env.sh || exit 1
SECONDS=0
LOG=$OUT/x2_neighbours.log
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $LOG
NAMES=r3_m64n64b2_persistent_split_x2,r4_n64b5_persistent_own_pairplan,r4_n128b2_pingpong_persistent_split_half
SHAPES=8x32x1024x128c,4x32x512x128c,16x32x512x128c,8x32x1024x128ch,16x32x512x128ch,4x32x512x128ch
for i in 2 3; do
  mkdir -p /tmp/nb$i
  timeout -k 5 150 python3 gpu/money_ab.py /tmp/nb$i 5 $NAMES $SHAPES > /tmp/nb$i.log 2>&1
  echo "[${SECONDS}s] run $i rc $?" | tee -a $LOG
  cp /tmp/nb$i/money_ab.csv $OUT/x2_neighbours_ab_$i.csv
done
timeout -k 5 150 python3 -m pytest -o addopts="" -q -p no:cacheprovider tests/test_gluon_dispatch.py \
  -k "on_gpu and x2" 2>&1 | tail -5 | tee -a $LOG
echo "[${SECONDS}s] done" | tee -a $LOG
