#!/bin/bash
# On an H200: the head-dim work of issue 13 in one call of under 9 minutes. Results under $OUT (8 files).
#   1. python -m fa2.tune --cases headdim,tail: the keys of the two-piece head dims (80, 96, 160, 192) at the
#      head-dim sweep's shapes, and of the grids under 4 waves, merged into fa2/configs/<GPU>.json
#      (compiled in 12 processes first, then timed from CUDA graphs; the table is rewritten after every key)
#   2. gpu/headdim_check.py: every head dim (32 ... 256, 40, 72, 200) against fp64 and SDPA, through
#      fa2.attention (plans, shipped configs, host descriptors) and with device descriptors
#   3. python -m fa2.bench --sweep headdim: fa2 vs SDPA FLASH and cuDNN, D = 64 ... 256
#   4. if time is left: tests/test_headdim.py and tests/test_plan.py on the GPU
# Each step has a time limit, so a slow step cannot take the later ones with it.
set -o pipefail
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  2>&1 | tee $OUT/tune.log
timeout -k 10 270 python3 -m fa2.tune --cases headdim,tail --jobs 12 --rep-ms 25 2>&1 | grep -v Warning \
  | tee -a $OUT/tune.log || status=1
cp fa2/configs/*.json $OUT/
echo "[${SECONDS}s] tuned" | tee -a $OUT/tune.log
# a head dim the table lacks (40: 32 + 16) autotunes once; 11 processes share the GPU then, so keep that choice
# out of the cache the benchmark reads
FA2_CACHE_DIR=$(mktemp -d) timeout -k 10 100 python3 gpu/headdim_check.py $OUT > $OUT/headdim_check.log 2>&1 \
  || status=1
tail -3 $OUT/headdim_check.log
echo "[${SECONDS}s] checked"
timeout -k 10 200 python3 -m fa2.bench --sweep headdim --providers fa2,sdpa_flash,sdpa_cudnn --out $OUT \
  > $OUT/bench.log 2>&1 || status=1
tail -62 $OUT/bench.log
echo "[${SECONDS}s] benchmarked"
left=$((520 - SECONDS))
if [ $left -gt 40 ]; then
  timeout -k 5 $left python3 -m pytest tests/test_headdim.py tests/test_plan.py -o addopts="" -q \
    -p no:cacheprovider -W ignore::DeprecationWarning > $OUT/pytest.log 2>&1 || status=1
  tail -5 $OUT/pytest.log
fi
echo "[${SECONDS}s] done, status $status"
exit $status
