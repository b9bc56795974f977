#!/bin/bash
# On the GPU machine: execute every chapter in place, then the benchmark sweeps. Results under $OUT.
set -o pipefail
source gpu/env.sh || exit 1
python3 gpu/execute_notebooks.py "$@" 2>&1 | tee $OUT/notebooks.log
tar czf $OUT/notebooks.tgz book/*.ipynb book/results
for sweep in ${SWEEPS:-money headline reference}; do
  # reference: every provider but flex (torch.compile per shape would take most of the call's time)
  args=""; [ "$sweep" = reference ] && args="--providers fa2,fa2_ch6,sdpa_flash,sdpa_cudnn"
  python3 -m fa2.bench --sweep $sweep $args --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" | tail -40
done
