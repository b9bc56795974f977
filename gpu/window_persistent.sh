#!/bin/bash
# PERSISTENT with a window in units of one query tile (longest first; pairs, causal's schedule, left the last
# round ~10 % short there: tiles under a window are of nearly equal length). ~6 min on an H200: the 12 window
# cases against fp64 and the 32k window problem timed for the persistent config beside the two configs the window
# families use; if the persistent one is the fastest there, the window sweep with it (the table's "windows"
# source). Results under $OUT: window_persistent.log, gluon_window.csv, gluon_window_check.csv,
# gluon_window_sweep.csv (when run)
source gpu/env.sh || exit 1
SECONDS=0
status=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv 2>&1 | tee $OUT/window_persistent.log
timeout -k 10 150 python3 gpu/gluon_window.py $OUT 100 r4_n64b3_pingpong,r4_n128b2_pingpong,r4_n64b3_pingpong_persistent \
  > $OUT/check.log 2>&1 || status=1
grep -E "passed every|fail|FAIL|ms " $OUT/check.log | tail -10 | tee -a $OUT/window_persistent.log
echo "[${SECONDS}s] checked and timed" | tee -a $OUT/window_persistent.log
fastest=$(python3 - <<'PY'
import csv, os
rows = [r for r in csv.DictReader(open(os.environ["OUT"] + "/gluon_window.csv")) if "window" in r["problem"]
        and r["provider"].startswith("gluon_")]
print(min(rows, key=lambda r: float(r["ms"]))["provider"] if rows else "none")
PY
)
echo "fastest at the 32k window problem: $fastest" | tee -a $OUT/window_persistent.log
if [ "$status" = 0 ] && [ "$fastest" = gluon_r4_n64b3_pingpong_persistent ]; then
  timeout -k 10 280 python3 gpu/gluon_window.py sweep $OUT 240 \
    r4_n64b3_pingpong,r4_n128b2_pingpong,r1_m128n64b2w4,r4_n64b3_pingpong_persistent > $OUT/sweep.log 2>&1 || status=1
  tail -3 $OUT/sweep.log | tee -a $OUT/window_persistent.log
fi
rm -f $OUT/check.log $OUT/sweep.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/window_persistent.log
exit $status
