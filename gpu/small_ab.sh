#!/bin/bash
# On the GPU machine (~2 min on an H200): the two headline shapes below 0.95x cuDNN, (32, 32, 512, 128) causal
# (rung 1 runs there) and (1, 16, 16384, 64) non-causal (chapter 6's kernel runs there), in two runs of five
# interleaved rounds (gpu/money_ab.py) with the fp64-checked candidates that might win there: the 64-key
# persistent configs with their own key ranges, with and without Q in registers (Q_REGS loads the next item's Q
# at once: short items may gain), and the 128-key ones. Results under $OUT: small_ab_1.csv, small_ab_2.csv
source gpu/env.sh || exit 1
K=r1_m128n64b2w4,r1_m64n128b2w4,r4_n64b3_pingpong_persistent_own,r4_n64b3_pingpong_persistent_own_qregs
K=$K,r4_n64b3_pingpong_scheduled_own_qregs,r4_n128b2_pingpong_persistent_split,r4_n128b2_pingpong_scheduled_split
K=$K,r4_n128b3_pingpong
for i in 1 2; do
  mkdir -p /tmp/ab$i
  timeout -k 5 100 python3 gpu/money_ab.py /tmp/ab$i 5 $K 32x32x512x128c,1x16x16384x64f > /tmp/ab$i.log 2>&1
  echo "run $i rc $? $(grep -c . /tmp/ab$i/money_ab.csv) rows"
  cp /tmp/ab$i/money_ab.csv $OUT/small_ab_$i.csv
done
