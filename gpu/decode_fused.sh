#!/bin/bash
# On the GPU machine (under 3 min on an H200): chapter 9's fused combine (opt-in; measured slower at B=1, §9.11)
# -- the GPU tests of tests/test_decode.py (the GPU-only cases but torch.compile's inductor, whose compile is slow: CUDA-graph replay
# two-launch and fused, 300 back-to-back fused calls against the two-launch result, the family shapes, head dims,
# 64-bit offsets) and its fused-combine cases, then the decode sweep with fa2_fused timed beside
# fa2 in the same run (--no-tune; --quick: B in {1, 32}, N in {1k, 8k, 128k}; FULL=1 for the whole family, ~2x).
# Results under $OUT:
#   decode_pytest.log             the tests
#   decode.csv, decode.log        python -m fa2.bench --sweep decode --no-tune [--quick]: the summary's "fused us"
#                                 column beside "fa2 us", and the B=1 N=8k goal for each
set -o pipefail
source gpu/env.sh || exit 1
source gpu/decode_sweep.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout --kill-after=10 90 python3 -m pytest tests/test_decode.py -o addopts="" -q -p no:cacheprovider \
  -W ignore::DeprecationWarning -k "fused or cuda_graph or family_shapes or head_dims_on_gpu or two_to_the_31" \
  > $OUT/decode_pytest.log 2>&1
status=$?
tail -15 $OUT/decode_pytest.log
decode_sweep 80 || status=1
exit $status
