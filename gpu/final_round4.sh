#!/bin/bash
# On the GPU machine (~8 min on an H200), after gpu/gluon_round4.sh's table is committed: gpu/sweeps.sh (money twice,
# headline, reference with the table) and Nsight Compute's profile of the Gluon config the money shot now runs
# (python -m fa2.profile --studies gluon). Results under $OUT: sweeps.tgz (sweeps.sh's 8 files), profile_gluon.csv,
# final.log. (Its run on the H200 used a 60-s headline limit in sweeps.sh and copied a file the profile does not
# write; gpu/final_round4b.sh re-ran both, and book/results/ holds those. Both are mended here.)
source gpu/env.sh || exit 1
SECONDS=0
S=/tmp/sweeps
mkdir -p $S
OUT=$S bash gpu/sweeps.sh > $OUT/final.log 2>&1
echo "[${SECONDS}s] sweeps rc $?" | tee -a $OUT/final.log
tar czf $OUT/sweeps.tgz -C $S .
timeout -k 10 170 python3 -m fa2.profile --out /tmp/profile --studies gluon --budget-s 140 >> $OUT/final.log 2>&1
echo "[${SECONDS}s] profile rc $?" | tee -a $OUT/final.log
cp /tmp/profile/profile_metrics.csv $OUT/profile_gluon.csv     # the study writes profile_metrics.csv
