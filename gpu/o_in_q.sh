#!/bin/bash
# On the GPU machine (~5 min on an H200): O_IN_Q (chapter 12's appendix on short work items: a persistent
# consumer stages O in its Q buffer, and loads the next item's Q into it once the TMA store has read it), which
# leaves the O staging buffers' shared memory to the K/V ring: a third 64-key buffer for rung 3's 64-row programs
# at two per SM (PROGRAMS_PER_SM=2), a sixth for the 64-key rung-4 ring, a third for the 128-key one.
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128), (8, 32, 512, 128),
#     (8, 32, 2048, 128) and (1, 32, 8192, 128) causal bf16: the candidates that passed beside the table's configs
#     at N = 512 and at the money shot, rung 3's 2-buffer config at two per SM, chapter 6's kernel, the shipped
#     choice and cuDNN.
# Results under $OUT: o_in_q.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, o_in_q_ab_{1,2}.csv,
# o_in_q_fp16_ab_{1,2}.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r3_m64n64b3_persistent_oinq_x2 r3_m64n64b3_persistent_split_oinq_x2 r3_m64n64b2_persistent_split_oinq_x2"
NEW="$NEW r4_n64b6_persistent_own_pairplan_oinq r4_n128b3_persistent_split_half_pairplan_oinq"
K=r4_n64b5_persistent_own_pairplan,r4_n128b2_pingpong_persistent_split_half,r3_m64n64b2_persistent_split_x2
check_and_time o_in_q "$NEW" $K 32x32x512x128c,8x32x512x128c,8x32x2048x128c,1x32x8192x128c 150
# 3. Two more runs in fp16 at (8, 32, 512, 128) and (32, 32, 512, 128) causal: the table's fp16 config there (rung 1,
#    64-row tiles), the 64-key ring, rung 3 at two per SM, and the two-per-SM O_IN_Q candidates that passed.
F=r1_m64n64b2w4,r4_n64b5_persistent_own_pairplan,r3_m64n64b2_persistent_split_x2
for name in $BOTH; do
  case $name in *_x2) F=$F,$name;; esac
done
echo "[${SECONDS}s] fp16 timing: $F" | tee -a $LOG
ab_twice o_in_q_fp16 100 $F 8x32x512x128ch,32x32x512x128ch
