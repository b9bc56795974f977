#!/bin/bash
# On the GPU machine: rehearse a Colab T4 (fp16 only, no Hopper path) by executing every chapter with the
# book's bf16 and Hopper gates forced off (FA2_DISABLE, see fa2/notebook.py). Runs on a throw-away copy of
# the checkout, so the stored outputs are untouched. Writes $OUT/t4_rehearsal.log and $OUT/t4_notebooks.tgz.
set -o pipefail
source gpu/env.sh || exit 1
rm -rf /tmp/t4 && cp -r . /tmp/t4 && cd /tmp/t4 || exit 1
FA2_DISABLE=bf16,hopper PYTHONPATH=/tmp/t4:$PYTHONPATH python3 gpu/execute_notebooks.py 2>&1 \
  | grep -v -E "Warn|IPKernelApp" | tee $OUT/t4_rehearsal.log
tar czf $OUT/t4_notebooks.tgz book/*.ipynb
