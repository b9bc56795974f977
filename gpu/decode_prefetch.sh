#!/bin/bash
# On the GPU machine (~6 min on an H200): fa2.decode's L2 prefetch of each split's first tile (config "prefetch",
# chapter 9 section 9.13) -- the prefetch and CUDA-graph cases of tests/test_decode.py (<= 150 s), then the whole
# decode family with fa2_prefetch and fa2_noprefetch timed beside fa2 and the peers in the same run (--no-tune;
# <= 330 s). Results under $OUT:
#   gpu.txt                  the GPU, its clocks and temperature
#   decode_pytest.log        the tests
#   decode.csv, decode.log   python -m fa2.bench --sweep decode --no-tune --providers ...: "pf us" / "no-pf us"
set -o pipefail
source gpu/env.sh || exit 1
nvidia-smi --query-gpu=name,compute_cap,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/gpu.txt
timeout --kill-after=10 150 python3 -m pytest tests/test_decode.py -o addopts="" -q -p no:cacheprovider \
  -W ignore::DeprecationWarning -k "prefetch or (cuda_graph and not fused) or family_shapes" -rs \
  > $OUT/decode_pytest.log 2>&1
status=$?
tail -8 $OUT/decode_pytest.log
timeout --kill-after=10 330 python3 -m fa2.bench --sweep decode --no-tune --no-plot \
  --providers copy,fa2,fa2_prefetch,fa2_noprefetch,sdpa_flash,sdpa_cudnn --out $OUT > $OUT/decode.log 2>&1 || status=1
grep -v -E "Warning|it/s" $OUT/decode.log | tail -60
exit $status
