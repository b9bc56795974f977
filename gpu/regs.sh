#!/bin/bash
# On the GPU machine (~4 min on an H200): the (32, 32, 512, 128) bf16 causal table choice with the registers split
# otherwise between its consumers and its producer (CONSUMER_REGS / PRODUCER_REGS 232/48, 224/64, 240/24), checked
# (96 fp64 cases, 12 window cases; the rows appended to this copy's book/results/gluon_check.csv), then two runs of
# five interleaved rounds at that shape alone beside the table's choice, and the table rebuilt with them --newer.
# Results under $OUT: regs.log, NVIDIA_H200.gluon.json, results.tgz (gluon_check.csv, gluon_resources.csv,
# gluon_window_check.csv, regs_ab_{1,2}.csv)
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n128b2_persistent_split_half_pairplan_r232 r4_n128b2_persistent_split_half_pairplan_r224"
NEW="$NEW r4_n128b2_persistent_split_half_pairplan_p24"
K=r4_n128b2_persistent_split_half_pairplan,r4_n128b2_pingpong_persistent_split_half
check_and_time regs "$NEW" $K 32x32x512x128c
python3 gpu/append_checks.py $OUT gpu/regs.sh | tee -a $LOG
rebuild_table $OUT/regs_ab_1.csv $OUT/regs_ab_2.csv
echo "[${SECONDS}s] table" | tee -a $LOG
cd $OUT && tar czf results.tgz gluon_check.csv gluon_resources.csv gluon_window_check.csv regs_ab_?.csv \
  && rm gluon_check.csv gluon_resources.csv gluon_window_check.csv regs_ab_?.csv
