#!/bin/bash
# On the GPU machine (~5 min on an H200, limits per step keep it under 6): chapter 10's kernel gets its own configs.
#   1. the GPU-only cases of tests/test_varlen.py (every tile config, TMA and pointer loads, no host sync,
#      CUDA-graph capture)                                                          <= 100 s
#   2. python -m fa2.tune --kernel varlen: every pruned candidate of every case checked against fp64, timed
#      from a CUDA graph; each key's winner checked on ragged sequences before it is written to
#      fa2/configs/<GPU>.varlen.json (no new case after 140 s)                       <= 210 s
#   3. tests/test_varlen_configs.py on the GPU: every config of the new table against fp64 again  <= 40 s
#   4. python -m fa2.bench --sweep varlen and --sweep window with the tuned table    <= 2 x 60 s
# Results under $OUT (8 files):
#   gpu.txt                      the GPU and its clocks
#   pytest.log                   steps 1 and 3
#   tune.log                     the tuner's output, then the config each benchmark problem launches with
#   NVIDIA_H200.varlen.json      the table (copy to fa2/configs/ to ship it)
#   varlen.csv, varlen.log       python -m fa2.bench --sweep varlen (16 packed sequences, 128..4096)
#   window.csv, window.log       python -m fa2.bench --sweep window (N = 32k, window (4096, 0))
set -o pipefail
source gpu/env.sh || exit 1
started=$SECONDS
stamp() { echo "[$((SECONDS - started)) s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/gpu.txt
xdist=""
python3 -c "import xdist" 2>/dev/null && xdist="-n 5"          # the GPU tests are compile-bound: in parallel
timeout --kill-after=10 100 python3 -m pytest tests/test_varlen.py -k gpu $xdist -o addopts="" -q \
  -p no:cacheprovider -W ignore::DeprecationWarning > $OUT/pytest.log 2>&1
status=$?
stamp "GPU tests of tests/test_varlen.py: exit $status"; tail -5 $OUT/pytest.log
table=fa2/configs/$(python3 -c "import torch; from fa2.varlen_configs import table_file_name; \
print(table_file_name(torch.cuda.get_device_name()))")
timeout --kill-after=10 210 python3 -m fa2.tune --kernel varlen --jobs 16 --budget-s 140 --rep-ms 25 \
  > $OUT/tune.log 2>&1
rc=$?; [ $rc -ne 0 ] && status=1
stamp "python -m fa2.tune --kernel varlen: exit $rc"; grep -E "ships|wrote|budget|failed" $OUT/tune.log
[ -f "$table" ] && cp "$table" $OUT/
python3 - >> $OUT/tune.log 2>&1 <<'PY'
import torch
from fa2 import varlen_configs as vc
from fa2.bench_dropin import varlen_problems, window_problems
print("configs the benchmark problems launch with:")
q = torch.empty(1, 1, 128, device="cuda", dtype=torch.bfloat16)
for p in varlen_problems() + window_problems():
    n = max(p.lengths)
    print(f"  {p.name():58s} {vc.tuning_key(p.D, q.dtype, p.causal, p.window, n, n):40s} "
          f"{vc.launch_config(q, n, n, p.causal, p.window)}")
PY
tail -4 $OUT/tune.log
timeout --kill-after=10 40 python3 -m pytest tests/test_varlen_configs.py -k gpu -o addopts="" -q \
  -p no:cacheprovider -W ignore::DeprecationWarning >> $OUT/pytest.log 2>&1 || status=1
stamp "the new table's configs against fp64 (tests/test_varlen_configs.py -k gpu)"; tail -2 $OUT/pytest.log
for sweep in varlen window; do
  timeout --kill-after=10 60 python3 -m fa2.bench --sweep $sweep --out $OUT > $OUT/$sweep.log 2>&1 || status=1
  stamp "python -m fa2.bench --sweep $sweep"; grep -v -E "Warning|it/s" $OUT/$sweep.log | tail -9
done
exit $status
