#!/bin/bash
# On the GPU machine (~1 min on an H200): gpu/plan_host.py (a Gluon plan's host time against chapter 6's), then
# chapter 12's dispatch cell re-run with rerun_cells.py (which kernel fa2.attention's plan picks at two shapes, with
# its fp64 error; needs `carry: [".whl"]`). Results under $OUT: plan_host.txt, rerun.log, chapter12.tgz
source gpu/env.sh || exit 1
timeout -k 5 120 python3 gpu/plan_host.py $OUT > $OUT/plan_host.log 2>&1
echo "plan_host status $?"
(cd book && timeout -k 10 200 python3 ../gpu/rerun_cells.py 12_gluon_hopper.ipynb 1,2 50) > $OUT/rerun.log 2>&1
echo "rerun status $?"
tail -3 $OUT/rerun.log
tar czf $OUT/chapter12.tgz book/12_gluon_hopper.ipynb
