#!/bin/bash
# On the GPU machine (under 3 min on an H200): fa2.decode's Programmatic Dependent Launch (opt-in config "pdl",
# "auto" by default since this measured it: PDL from 8 splits) -- the PDL cases of tests/test_decode.py and fa2.decode's CUDA-graph replay
# with and without PDL (the fused combine's graph test is decode_fused.sh's), 300 back-to-back PDL calls over rotating
# q's against the default plan (with and without a copy kernel writing q right before each call; the heuristic's
# split count, 8 and 64 splits, the fused combine with PDL), the sm_90 compile of the kernels' griddepcontrol;
# <= 85 s), then the decode sweep with fa2_pdl and fa2_fused timed beside fa2 in the same run (--no-tune;
# --quick: B in {1, 32}, N in {1k, 8k, 128k}; FULL=1 for the whole family, ~2x; <= 85 s, SWEEP_S changes the cap).
# Results under $OUT:
#   gpu.txt                       the GPU, its clocks and temperature
#   decode_pytest.log             the tests
#   decode.csv, decode.log        python -m fa2.bench --sweep decode --no-tune [--quick]: the summary's "pdl us" and
#                                 "fused us" columns beside "fa2 us", and the B=1 N=8k goal (<= 15 us) for each
set -o pipefail
source gpu/env.sh || exit 1
source gpu/decode_sweep.sh
nvidia-smi --query-gpu=name,compute_cap,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/gpu.txt
timeout --kill-after=10 85 python3 -m pytest tests/test_decode.py -o addopts="" -q -p no:cacheprovider \
  -W ignore::DeprecationWarning -k "pdl or (cuda_graph and not fused)" -rs \
  > $OUT/decode_pytest.log 2>&1
status=$?
tail -15 $OUT/decode_pytest.log
decode_sweep 85 || status=1
exit $status
