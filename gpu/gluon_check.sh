#!/bin/bash
# On an H200 (sm_90): the Gluon Hopper rungs of fa2/gluon/attention_hopper.py (all have run on an H200, all
# correct: book/results/gluon_check.csv). Under ~5 1/3 minutes: each step has a time limit, so a hung rung cannot take the
# later steps with it, and no timing step starts once 230 s have passed (worst case 230 + 35 + 50 s + summary).
#   1. gpu/gluon_check.py check: each rung of GLUON_CHECK (one process each) over 12 shapes x D 64/128 x
#      bf16/fp16 x causal/not against fp64 (derived bounds, LSE, NaN fails) and <= 2x SDPA FLASH's error; ptxas
#      registers/spills, SASS registers, setmaxnreg, smem
#   2. gpu/gluon_check.py bench: the headline sweep (10 shapes, (8, 32, 2048, 128) bf16 causal first) for every
#      rung of GLUON_TIME that passed step 1 (rung 2, the slowest of rungs 1-3 on the H200, is left out by default
#      to make room for rung 4), then the config variants of GLUON_VARIANTS of rungs that passed (each output checked
#      against SDPA FLASH), then fa2.attention (chapter 6's kernel), SDPA FLASH and SDPA cuDNN
#   3. gpu/gluon_check.py summary: joined CSVs and a table
# GLUON_CHECK (default "4 3 1 2"), GLUON_TIME (default "4 3 1"), GLUON_VARIANTS (default
# "4:PINGPONG=1 4:BLOCK_N=64"; RUNG:KEY=VALUE[,KEY=VALUE...] each) choose the steps.
# Results: $OUT/gluon_check.csv, $OUT/gluon_resources.csv, $OUT/gluon_bench.csv (+ the per-step CSVs), $OUT/gluon.log
set -o pipefail
source gpu/env.sh || exit 1
SECONDS=0
status=0
CHECK=${GLUON_CHECK-4 3 1 2}
TIME=${GLUON_TIME-4 3 1}
VARIANTS=${GLUON_VARIANTS-4:PINGPONG=1 4:BLOCK_N=64}
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1;
  python3 -c "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__)"; } \
  2>&1 | tee $OUT/gluon.log
passed=" "   # rungs that neither hung nor faulted in step 1 (exit 0: every check ok, 1: some failed)
for rung in $CHECK; do
  timeout -k 5 55 python3 gpu/gluon_check.py check $OUT $rung > $OUT/gluon_check_r$rung.log 2>&1
  rc=$?
  [ $rc -le 1 ] && passed+="$rung "
  [ $rc -eq 0 ] || status=1
  tail -2 $OUT/gluon_check_r$rung.log | tee -a $OUT/gluon.log
  # 124/137: killed at the limit; the log's last "running" line names the shape it hung (or was slow) on
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && { echo "rung $rung: KILLED at 55 s (rc $rc), last launch:"; \
    grep '^running' $OUT/gluon_check_r$rung.log | tail -1; } | tee -a $OUT/gluon.log
  echo "[${SECONDS}s] rung $rung checked" | tee -a $OUT/gluon.log
done
timing() {   # timing RUNG [KEY=VALUE ...]: one bench step, if its rung passed step 1 and time is left
  local rung=$1
  [[ "$passed" == *" $rung "* ]] || { echo "rung $rung did not pass step 1: not timed ($*)" | tee -a $OUT/gluon.log;
                                      return; }
  [ $SECONDS -lt 230 ] || { echo "no time left to time $*" | tee -a $OUT/gluon.log; status=1; return; }
  shift
  timeout -k 5 35 python3 gpu/gluon_check.py bench $OUT r$rung "$@" 2>&1 | grep -v Warning | tee -a $OUT/gluon.log \
    || status=1
  echo "[${SECONDS}s] rung $rung $* timed" | tee -a $OUT/gluon.log
}
for rung in $TIME; do
  timing $rung
done
for variant in $VARIANTS; do
  overrides=${variant#*:}
  timing ${variant%%:*} ${overrides//,/ }
done
timeout -k 5 50 python3 gpu/gluon_check.py bench $OUT peers 2>&1 | grep -v Warning | tee -a $OUT/gluon.log \
  || status=1
python3 gpu/gluon_check.py summary $OUT 2>&1 | tee -a $OUT/gluon.log
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/gluon.log
exit $status
