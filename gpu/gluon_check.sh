#!/bin/bash
# On an H200 (sm_90): the Gluon Hopper rungs of fa2/gluon/attention_hopper.py, never run on a GPU before.
# About 2-3 minutes; under 5 (each step has a time limit, so a hung rung cannot take the later steps with it, and
# the timing of the rungs is skipped once 200 s have passed).
#   1. gpu/gluon_check.py check: each rung (one process each) over 12 shapes x D 64/128 x bf16/fp16 x causal/not
#      against fp64 (derived bounds, LSE, NaN fails) and <= 2x SDPA FLASH's error; ptxas registers/spills, smem
#   2. gpu/gluon_check.py bench: the headline sweep (10 shapes, (8, 32, 2048, 128) bf16 causal first) for every
#      rung that passed step 1, then fa2.attention (chapter 6's kernel), SDPA FLASH and SDPA cuDNN
#   3. gpu/gluon_check.py summary: joined CSVs and a table
# Results: $OUT/gluon_check.csv, $OUT/gluon_resources.csv, $OUT/gluon_bench.csv (+ the per-step CSVs), $OUT/gluon.log
set -o pipefail
source gpu/env.sh || exit 1
SECONDS=0
status=0
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1;
  python3 -c "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__)"; } \
  2>&1 | tee $OUT/gluon.log
timed=()     # rungs that neither hung nor faulted in step 1 (exit 0: every check ok, 1: some failed)
for rung in 1 2 3; do
  timeout -k 5 55 python3 gpu/gluon_check.py check $OUT $rung > $OUT/gluon_check_r$rung.log 2>&1
  rc=$?
  [ $rc -le 1 ] && timed+=($rung)
  [ $rc -eq 0 ] || status=1
  tail -2 $OUT/gluon_check_r$rung.log | tee -a $OUT/gluon.log
  # 124/137: killed at the limit; the log's last "running" line names the shape it hung (or was slow) on
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && { echo "rung $rung: KILLED at 55 s (rc $rc), last launch:"; \
    grep '^running' $OUT/gluon_check_r$rung.log | tail -1; } | tee -a $OUT/gluon.log
  echo "[${SECONDS}s] rung $rung checked" | tee -a $OUT/gluon.log
done
for rung in "${timed[@]}"; do
  [ $SECONDS -lt 200 ] || { echo "no time left to time rung $rung" | tee -a $OUT/gluon.log; status=1; continue; }
  timeout -k 5 35 python3 gpu/gluon_check.py bench $OUT r$rung 2>&1 | grep -v Warning | tee -a $OUT/gluon.log \
    || status=1
  echo "[${SECONDS}s] rung $rung timed" | tee -a $OUT/gluon.log
done
timeout -k 5 50 python3 gpu/gluon_check.py bench $OUT peers 2>&1 | grep -v Warning | tee -a $OUT/gluon.log \
  || status=1
python3 gpu/gluon_check.py summary $OUT 2>&1 | tee -a $OUT/gluon.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/gluon.log
exit $status
