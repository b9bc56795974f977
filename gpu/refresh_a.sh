#!/bin/bash
# On the GPU machine (~7 min on an H200): after the Gluon table changed two causal bf16 shapes (the money shot and
# (32, 32, 512, 128) run r4_n128b2_pingpong_persistent_split_half), the reference sweep's first half again
# (gpu/reference3.sh a: N <= 2048, where both shapes are; the N >= 8192 half runs what it ran) and Nsight Compute's
# gluon study (python -m fa2.profile --studies gluon: the money shot's config, fa2 and cuDNN).
# Results under $OUT: reference_a.csv, reference_a.log, profile_gluon.csv, profile.log
bash gpu/reference3.sh a
timeout -k 10 130 python3 -m fa2.profile --out /tmp/profile --studies gluon --budget-s 100 > $OUT/profile.log 2>&1
echo "[$SECONDS s] profile rc $?" | tee -a $OUT/profile.log
cp /tmp/profile/profile_metrics.csv $OUT/profile_gluon.csv     # the study writes profile_metrics.csv
tail -15 $OUT/profile.log
