#!/bin/bash
# On the GPU machine (~7 min on an H200): after the Gluon table took the interleaved rounds' verdict at the headline
# shape (the persistent config), the prefill sweeps again (gpu/sweeps.sh: money twice, headline, reference), then
# chapter 12's dispatch cell re-run (which kernel fa2.attention's plan picks at two shapes; needs `carry: [".whl"]`).
# Results under $OUT: the sweeps' files (sweeps.sh) and chapter12.tgz (the notebook with that cell's new output)
bash gpu/sweeps.sh
status=$?
source gpu/env.sh || exit 1
(cd book && timeout -k 10 200 python3 ../gpu/rerun_cells.py 12_gluon_hopper.ipynb 1,2 39) > $OUT/rerun.log 2>&1 \
  || status=1
tail -3 $OUT/rerun.log
tar czf $OUT/chapter12.tgz book/12_gluon_hopper.ipynb
exit $status
