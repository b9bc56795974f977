#!/bin/bash
# Not yet run. On the GPU machine (~9 min on an H200): the Gluon table rebuilt over the whole reference sweep with
# this session's candidates (the planned schedule and each consumer on its own key range, chapter 12 §12.11)
# beside the six configs the shipped table chose from: gpu/gluon_sweep.py reference (<= 480 s, one run, fa2_ch6 and
# cuDNN as peers), then the table rebuilt from it with the same confirming runs and the two interleaved runs that
# decided the large causal D = 128 shapes (python -m fa2.gluon.dispatch). A second call should then re-run
# gpu/sweeps.sh (money, headline, reference with the new table) before README or chapter 11 quote anything.
# Results under $OUT: round3.log, gluon_reference.csv, NVIDIA_H200.gluon.json
source gpu/env.sh || exit 1
SECONDS=0
R=book/results
C=r1_m64n64b2w4,r1_m128n64b2w4,r1_m64n128b2w4,r4_n64b3_pingpong,r4_n64b3_pingpong_persistent,r4_n128b2_pingpong
C=$C,r4_n64b3_pingpong_scheduled,r4_n128b2_pingpong_scheduled,r4_n64b3_pingpong_persistent_own
C=$C,r4_n64b3_pingpong_scheduled_own
timeout -k 10 500 python3 gpu/gluon_sweep.py $OUT 480 $C reference fa2_ch6,sdpa_cudnn > /tmp/round3.log 2>&1
echo "[${SECONDS}s] sweep rc $? ($(grep -c . $OUT/gluon_reference.csv) rows)" | tee $OUT/round3.log
python3 -m fa2.gluon.dispatch $OUT/gluon_reference.csv fa2/configs/NVIDIA_H200.gluon.json \
  $R/gluon_reference.csv $R/reference_before_gluon.csv $R/headline_before_gluon.csv $R/money_before_gluon.csv \
  $R/money_run2_before_gluon.csv $R/gluon_sweep.csv --interleaved $R/money_ab_own_1.csv $R/money_ab_own_2.csv 2>&1 \
  | tee -a $OUT/round3.log | head -3
cp fa2/configs/NVIDIA_H200.gluon.json $OUT/
echo "[${SECONDS}s] done" | tee -a $OUT/round3.log
