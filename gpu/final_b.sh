#!/bin/bash
# On an H200 (~8 min, each step capped): chapter 12's dispatch table and profile, then chapter 12 executed.
#   1. gpu/gluon_sweep.py over the reference sweep (96 shapes, bf16 first): chapter 6's kernel (fa2) and the four
#      Gluon configs that passed every fp64 case of gpu/gluon_check.py (<= 215 s; no new shape after 175 s)
#   2. python -m fa2.gluon.dispatch: fa2/configs/NVIDIA_H200.gluon.json from that run
#   3. python -m fa2.profile --studies gluon: the best Gluon config, fa2 and cuDNN under Nsight Compute (<= 110 s)
#   4. book/12_gluon_hopper.ipynb executed (fa2.attention now dispatching by the new table)
# Results under $OUT: final_b.log, final_b.tgz (the notebook, gluon_reference.csv, profile_gluon.csv, the table)
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/final_b.log
timeout -k 5 215 python3 gpu/gluon_sweep.py $OUT 175 r1_m64n64b2w4,r1_m128n64b2w4,r1_m64n128b2w4,r4_n64b3_pingpong \
  reference fa2 > $OUT/gluon_reference.log 2>&1 || status=1
grep -E "stopped|fail|error" $OUT/gluon_reference.log | head -5 | tee -a $OUT/final_b.log
cp $OUT/gluon_reference.csv book/results/gluon_reference.csv
echo "[${SECONDS}s] reference sweep: $(($(wc -l < book/results/gluon_reference.csv) - 1)) rows" | tee -a $OUT/final_b.log
python3 -m fa2.gluon.dispatch book/results/gluon_reference.csv fa2/configs/NVIDIA_H200.gluon.json 2>&1 \
  | tee -a $OUT/final_b.log || status=1
timeout -k 5 110 python3 -m fa2.profile --out $OUT/profile --studies gluon --budget-s 80 > $OUT/profile.log 2>&1 \
  || status=1
tail -4 $OUT/profile.log | tee -a $OUT/final_b.log
cp $OUT/profile/profile_metrics.csv book/results/profile_gluon.csv
echo "[${SECONDS}s] profiled" | tee -a $OUT/final_b.log
timeout -k 10 140 python3 gpu/execute_notebooks.py 12_gluon_hopper 2>&1 | tail -3 | tee -a $OUT/final_b.log
tar czf $OUT/final_b.tgz book/12_gluon_hopper.ipynb book/results/gluon_reference.csv book/results/profile_gluon.csv \
  fa2/configs/NVIDIA_H200.gluon.json $OUT/gluon_reference.log $OUT/profile.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/final_b.log
exit $status
