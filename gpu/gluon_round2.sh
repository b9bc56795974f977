#!/bin/bash
# On an H200, after gluon_check.sh's first run (rungs 1-3 correct, slower than chapter 6's kernel with their
# default 128-row, 8-warp tiles): ~6 min, each step capped.
#   1. rung 4 (two consumer warpgroups) against fp64 over gluon_check.py's shapes (<= 55 s)
#   2. gpu/gluon_sweep.py: every config of its CONFIGS over the headline sweep beside fa2, FLASH, cuDNN (<= 200 s)
#   3. the two configs with the best geometric mean over fa2 checked against fp64 like step 1 (<= 55 s each)
# Results under $OUT: gluon_check_*.csv/log, gluon_resources_*.csv, gluon_sweep.csv/log, round2.log
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/round2.log
timeout -k 5 55 python3 gpu/gluon_check.py check $OUT 4 > $OUT/gluon_check_r4.log 2>&1 || status=1
tail -2 $OUT/gluon_check_r4.log | tee -a $OUT/round2.log
echo "[${SECONDS}s] rung 4 checked" | tee -a $OUT/round2.log
timeout -k 5 200 python3 gpu/gluon_sweep.py $OUT 150 2>&1 | grep -v Warning > $OUT/gluon_sweep.log || status=1
grep -E "best|stopped|fail|error" $OUT/gluon_sweep.log | tail -14 | tee -a $OUT/round2.log
echo "[${SECONDS}s] swept" | tee -a $OUT/round2.log
python3 gpu/gluon_sweep.py pick $OUT 2 > $OUT/picked.txt 2>> $OUT/round2.log
cat $OUT/picked.txt | tee -a $OUT/round2.log
while read -r rung overrides; do
  [ -n "$rung" ] || continue
  timeout -k 5 55 python3 gpu/gluon_check.py check $OUT $rung $overrides > $OUT/gluon_check_r${rung}_picked.log 2>&1 \
    || status=1
  tail -1 $OUT/gluon_check_r${rung}_picked.log | sed "s/^/r$rung $overrides: /" | tee -a $OUT/round2.log
  echo "[${SECONDS}s] checked r$rung $overrides" | tee -a $OUT/round2.log
done < $OUT/picked.txt
exit $status
