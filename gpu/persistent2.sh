#!/bin/bash
# PERSISTENT (~2.5 min on an H200): against fp64 (96 cases), then timed over the headline sweep beside the same
# config without PERSISTENT, in one run. (Branch persistent-balanced: causal units of two query tiles, the k-th
# longest and the k-th shortest of a head, round-robin head by head; the producer's constexprs real constexprs.) Results under $OUT: p2.log, gluon.tgz
source gpu/env.sh || exit 1
SECONDS=0
G=$OUT/gluon
mkdir -p $G
P="BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32"
timeout -k 5 85 python3 gpu/gluon_check.py check $G 4 $P > $G/check.log 2>&1
rc=$?
tail -1 $G/check.log | tee $OUT/p2.log
echo "[${SECONDS}s] check rc $rc" | tee -a $OUT/p2.log
if [ $rc -eq 0 ]; then
  timeout -k 5 40 python3 gpu/gluon_check.py bench $G r4 $P > $G/bench_p.log 2>&1
  timeout -k 5 40 python3 gpu/gluon_check.py bench $G r4 BLOCK_N=64 NUM_BUFFERS=3 PINGPONG=1 > $G/bench_n.log 2>&1
  python3 gpu/gluon_check.py summary $G > $G/summary.log 2>&1
  grep -A12 "shape (B, H" $G/summary.log | tee -a $OUT/p2.log
fi
echo "[${SECONDS}s] done" | tee -a $OUT/p2.log
tar czf /tmp/gluon.tgz -C $OUT gluon && rm -rf $G && mv /tmp/gluon.tgz $OUT/
exit $rc
