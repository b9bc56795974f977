#!/bin/bash
# On the GPU machine: execute every chapter in place, then the benchmark sweeps. Results under $OUT.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 \
  && python3 -m ipykernel install --user --name python3 >/dev/null || exit 1
python3 .ci/gpu/execute_notebooks.py "$@" 2>&1 | tee $OUT/notebooks.log
tar czf $OUT/notebooks.tgz book/*.ipynb book/results
for sweep in ${SWEEPS:-money headline reference}; do
  # reference: every provider but flex (torch.compile per shape would take most of the call's time)
  args=""; [ "$sweep" = reference ] && args="--providers fa2,sdpa_flash,sdpa_cudnn,sdpa_efficient"
  python3 -m fa2.bench --sweep $sweep $args --out $OUT 2>&1 | grep -v -E "Warning|it/s|run/s" | tail -40
done
