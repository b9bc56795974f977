#!/bin/bash
# On the GPU machine (~7 min on an H200): SPLIT_TAIL (chapter 12's appendix on short work items: a paired launch's last round dealt tile
# by tile in the kernel, no table) checked, timed, and given the (32, 32, 512, 128) table decision.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate; their
#     rows appended to this copy's book/results/gluon_check.csv (gpu/append_checks.py), as they are committed.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at four causal shapes: the candidates beside the same
#     configs without SPLIT_TAIL and SCHEDULED=2's planned last round.
#  3. Two runs at (32, 32, 512, 128) causal alone with the candidates for that shape, the Gluon table rebuilt with
#     them --newer (in place of gluon_short_ab_1/2.csv), and the headline sweep with that table.
# Results under $OUT: split_tail.log, NVIDIA_H200.gluon.json, headline.csv (its plot is drawn from it) and
# results.tgz (gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, split_tail_ab_{1,2}.csv,
# gluon_short2_ab_{1,2}.csv)
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_pingpong_persistent_split_half_tail r4_n128b2_persistent_split_half_tail"
K=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_persistent_split_half
K=$K,r4_n128b2_persistent_split_half_pairplan
check_and_time split_tail "$NEW" $K 32x32x512x128c,8x32x2048x128c,1x32x8192x128c,8x16x2048x64c
python3 gpu/append_checks.py $OUT gpu/split_tail.sh | tee -a $LOG
S=r4_n128b2_pingpong_persistent_split_half,r4_n128b2_persistent_split_half_pairplan
for name in $PASSED; do S=$S,$name; done
ab_twice gluon_short2 100 $S 32x32x512x128c
rebuild_table $OUT/gluon_short2_ab_1.csv $OUT/gluon_short2_ab_2.csv
echo "[${SECONDS}s] table" | tee -a $LOG
timeout -k 10 170 python3 -m fa2.bench --sweep headline --no-plot --out $OUT 2>&1 \
  | grep -v -E "Warning|it/s|run/s" >> $LOG
echo "[${SECONDS}s] headline" | tee -a $LOG
grep -E "geometric" $LOG | tail -4
cd $OUT && tar czf results.tgz gluon_check.csv gluon_resources.csv gluon_window_check.csv split_tail_ab_?.csv \
  gluon_short2_ab_?.csv && rm gluon_check.csv gluon_resources.csv gluon_window_check.csv split_tail_ab_?.csv \
  gluon_short2_ab_?.csv
