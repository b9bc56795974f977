#!/bin/bash
# On the GPU machine (~4 min on an H200): chapter 10's kernel -- its tests on the GPU (tests/test_varlen.py with
# its GPU-only cases, tests/test_bench_dropin.py), then the varlen and window benchmark sweeps with every
# provider that runs there. Results under $OUT:
#   dropin_pytest.log                 the tests
#   varlen.csv, varlen.log            python -m fa2.bench --sweep varlen (16 packed sequences, 128..4096)
#   window.csv, window.log            python -m fa2.bench --sweep window (N = 32k, window (4096, 0))
# Copy the CSVs to book/results/ for chapter 10. DROPIN_TESTS=0 skips the tests; DROPIN_SWEEPS="window" runs one sweep.
set -o pipefail
source gpu/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/gpu.txt
status=0
if [ "${DROPIN_TESTS:-1}" != 0 ]; then
  timeout --kill-after=10 150 python3 -m pytest tests/test_varlen.py tests/test_bench_dropin.py -o addopts="" -q \
    -p no:cacheprovider -W ignore::DeprecationWarning > $OUT/dropin_pytest.log 2>&1
  status=$?
  tail -15 $OUT/dropin_pytest.log
fi
for sweep in ${DROPIN_SWEEPS:-varlen window}; do
  timeout --kill-after=10 150 python3 -m fa2.bench --sweep $sweep --out $OUT > $OUT/$sweep.log 2>&1 || status=1
  grep -v -E "Warning|it/s" $OUT/$sweep.log | tail -20
done
exit $status
