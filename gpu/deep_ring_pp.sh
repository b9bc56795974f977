#!/bin/bash
# On the GPU machine (~5 min on an H200): the 5-deep (and 4-deep) ring of 64-key tiles for short causal items with
# ping-pong -- the two consumers' softmaxes taking turns, as at the long shapes -- against the table's config at
# N = 512 (the same ring without the turns; chapter 12's appendix on short work items).
#  1. gpu/gluon_check.py's 96 fp64 cases and gpu/gluon_window.py's 12 window cases for each new candidate.
#  2. Two runs of gpu/money_ab.py (5 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 512, 128) causal bf16:
#     the candidates that passed beside the table's config, chapter 6's kernel, the shipped choice and cuDNN.
# Results under $OUT: deep_ring_pp.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv,
# deep_ring_pp_ab_1.csv, deep_ring_pp_ab_2.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
NEW="r4_n64b5_pingpong_persistent_own_pairplan r4_n64b4_pingpong_persistent_own_pairplan"
check_and_time deep_ring_pp "$NEW" r4_n64b5_persistent_own_pairplan 32x32x512x128c,8x32x512x128c 100
