#!/bin/bash
# On the GPU machine (~1 min on an H200): SPLIT_EMPTY beside the same 128-key configs without it (one program per
# tile, paired units, planned), gpu/money_ab.py's two shapes in 5 interleaved rounds. Every config here passed
# gpu/gluon_check.py's 96 fp64 cases before (book/results/gluon_check.csv). Results under $OUT: split_pairs_ab.csv
source gpu/env.sh || exit 1
K=r4_n128b2_pingpong,r4_n128b2_pingpong_split,r4_n128b2_pingpong_persistent,r4_n128b2_pingpong_persistent_split
K=$K,r4_n128b2_pingpong_scheduled,r4_n128b2_pingpong_scheduled_split
timeout -k 5 150 python3 gpu/money_ab.py /tmp 5 $K > /tmp/ab.log 2>&1
status=$?
cp /tmp/money_ab.csv $OUT/split_pairs_ab.csv
tail -3 /tmp/ab.log
exit $status
