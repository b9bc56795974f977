#!/bin/bash
# On the GPU machine (~6 min on an H200): SPLIT_EMPTY (K and V freed to the producer separately, K loaded a step
# ahead of V; chapter 12 §12.11) checked and timed by gpu/check_then_ab.sh beside r4_n128b3_pingpong.
# Results under $OUT: split.log, gluon_check.csv, gluon_resources.csv, gluon_window_check.csv, split_ab.csv
P="PINGPONG=1 SPLIT_EMPTY=1"
W=r4_n128b2_pingpong_persistent_split,r4_n128b3_pingpong_split,r4_n64b3_pingpong_persistent_own_split
W=$W,r4_n128b3_pingpong,r4_n64b3_pingpong_persistent_own_qregs
exec bash gpu/check_then_ab.sh split $W r4_n128b3_pingpong \
  "r4_n128b2_pingpong_persistent_split: BLOCK_N=128 NUM_BUFFERS=2 $P PERSISTENT=1 PRODUCER_REGS=32" \
  "r4_n128b2_pingpong_scheduled_split: BLOCK_N=128 NUM_BUFFERS=2 $P PERSISTENT=1 PRODUCER_REGS=32 SCHEDULED=1" \
  "r4_n128b2_pingpong_split: BLOCK_N=128 NUM_BUFFERS=2 $P" \
  "r4_n128b3_pingpong_split: BLOCK_N=128 NUM_BUFFERS=3 $P" \
  "r4_n64b3_pingpong_persistent_own_split: BLOCK_N=64 NUM_BUFFERS=3 $P PERSISTENT=1 PRODUCER_REGS=32 OWN_RANGES=1"
