#!/bin/bash
# On the GPU machine (~7 min on an H200): Q in registers (Q_REGS) and 128-key tiles in a 3-deep ring (chapter 12
# §12.11) checked and timed by gpu/check_then_ab.sh, the window cases also for the OWN_RANGES variants (whose
# windowed code changed in a refactor). Results under $OUT: qregs.log, gluon_check.csv, gluon_resources.csv,
# gluon_window_check.csv, qregs_ab.csv
N64="BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32 OWN_RANGES=1 Q_REGS=1"
W=r4_n64b3_pingpong_own,r4_n64b3_pingpong_persistent_own,r4_n64b3_pingpong_scheduled_own
W=$W,r4_n64b3_pingpong_persistent_own_qregs,r4_n128b3_pingpong_qregs
exec bash gpu/check_then_ab.sh qregs $W r4_n64b3_pingpong_persistent_own \
  "r4_n64b3_pingpong_persistent_own_qregs: $N64" \
  "r4_n64b3_pingpong_scheduled_own_qregs: $N64 SCHEDULED=1" \
  "r4_n128b3_pingpong: BLOCK_N=128 NUM_BUFFERS=3 PINGPONG=1" \
  "r4_n128b3_pingpong_qregs: BLOCK_N=128 NUM_BUFFERS=3 PINGPONG=1 Q_REGS=1" \
  "r4_n128b2_pingpong_persistent_qregs: BLOCK_N=128 NUM_BUFFERS=2 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32 Q_REGS=1"
