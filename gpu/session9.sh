#!/bin/bash
# With r4_n64b3_pingpong_persistent and r4_n128b2_pingpong in the Gluon table (~6 min on an H200): the spread of
# one provider's time between interleaved measurements at two causal shapes (gpu/money_ab.py), then the prefill
# sweeps chapter 11 and the README read (gpu/sweeps.sh). The GPU's clocks and power are logged every second
# (nvidia-smi dmon) for the whole call. Results under $OUT: money_ab.csv, dmon.log + gpu/sweeps.sh's files
source gpu/env.sh || exit 1
nvidia-smi dmon -s pc -d 1 > $OUT/dmon.log 2>&1 &
DMON=$!
timeout -k 5 90 python3 gpu/money_ab.py $OUT 5 > $OUT/money_ab.log 2>&1
echo "money_ab rc $?"
bash gpu/sweeps.sh
status=$?
kill $DMON
python3 - <<'PY'
import csv, os, statistics as st
rows = list(csv.DictReader(open(os.environ["OUT"] + "/money_ab.csv")))
for key in sorted({(r["B"], r["N"]) for r in rows}):
    for p in dict.fromkeys(r["provider"] for r in rows):
        ms = [float(r["ms"]) for r in rows if (r["B"], r["N"]) == key and r["provider"] == p]
        print(key, f"{p:32s} median {st.median(ms):.4f} min {min(ms):.4f} max {max(ms):.4f}")
PY
rm -f $OUT/money_ab.log
exit $status
