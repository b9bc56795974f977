#!/bin/bash
# On the GPU machine (~8 min on an H200): the Gluon table rebuilt over the whole reference sweep with 128-key tiles
# freed K-before-V (SPLIT_EMPTY, chapter 12 §12.12) beside the configs the shipped table chose from (the
# persistent 64-key config without OWN_RANGES left out: it is the OWN_RANGES one's code wherever that one does not
# skip). gpu/gluon_sweep.py reference (<= 400 s, fa2_ch6 and cuDNN as peers), then gpu/money_ab.py twice (5
# interleaved rounds each) for the two large causal D = 128 shapes, then the table (python -m fa2.gluon.dispatch)
# from the sweep, confirmed by the committed runs and decided at those two shapes by the interleaved ones.
# Results under $OUT: round4.log, gluon_reference.csv, money_ab_split_1.csv, money_ab_split_2.csv,
# NVIDIA_H200.gluon.json
source gpu/env.sh || exit 1
SECONDS=0
R=book/results
G=/tmp/round4
mkdir -p $G/ab1 $G/ab2
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/round4.log
C=r1_m64n64b2w4,r1_m128n64b2w4,r1_m64n128b2w4,r4_n64b3_pingpong,r4_n128b3_pingpong,r4_n64b3_pingpong_persistent_own
C=$C,r4_n128b2_pingpong_persistent_split,r4_n128b2_pingpong_scheduled_split
timeout -k 10 420 python3 gpu/gluon_sweep.py $G 400 $C reference fa2_ch6,sdpa_cudnn > $G/sweep.log 2>&1
echo "[${SECONDS}s] sweep rc $? ($(grep -c . $G/gluon_reference.csv) rows)" | tee -a $OUT/round4.log
cp $G/gluon_reference.csv $OUT/
K=r4_n64b3_pingpong_persistent_own,r4_n128b2_pingpong_persistent_split,r4_n128b2_pingpong_scheduled_split
K=$K,r4_n128b3_pingpong
for i in 1 2; do
  timeout -k 5 80 python3 gpu/money_ab.py $G/ab$i 5 $K > $G/ab$i.log 2>&1
  cp $G/ab$i/money_ab.csv $OUT/money_ab_split_$i.csv
  cp $G/ab$i/money_ab.csv $R/money_ab_split_$i.csv
done
echo "[${SECONDS}s] interleaved runs done" | tee -a $OUT/round4.log
cp $G/gluon_reference.csv $R/gluon_reference_split.csv
python3 -m fa2.gluon.dispatch $R/gluon_reference_split.csv fa2/configs/NVIDIA_H200.gluon.json \
  $R/gluon_reference.csv $R/reference_before_gluon.csv $R/headline_before_gluon.csv $R/money_before_gluon.csv \
  $R/money_run2_before_gluon.csv $R/gluon_sweep.csv \
  --interleaved $R/money_ab_split_1.csv $R/money_ab_split_2.csv 2>&1 | tee -a $OUT/round4.log | head -3
cp fa2/configs/NVIDIA_H200.gluon.json $OUT/
echo "[${SECONDS}s] done" | tee -a $OUT/round4.log
