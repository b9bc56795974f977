#!/bin/bash
# On the GPU machine (~5 min on an H200): the prefill sweeps chapter 11 and the README read, in one process each.
#   money twice (the second run, money_run2.csv, gives the spread of two runs), headline, reference (fa2, fa2_ch6 --
#   chapter 6's kernel without the Gluon dispatch, so the dispatch's gain is measured in the same run -- FLASH and
#   cuDNN; no flex: torch.compile per shape would take most of the call)
# Results under $OUT (8 files): money.{csv,png}, money_run2.csv, headline.{csv,png}, reference.{csv,png},
# sweeps.log (the GPU, the commit, each sweep's table). The CSVs and plots go to book/results/.
set -o pipefail
source gpu/env.sh || exit 1
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv; git log --oneline -1; } \
  > $OUT/sweeps.log 2>&1
status=0
bench() { timeout --kill-after=10 "$1" python3 -m fa2.bench "${@:2}" --out $OUT 2>&1 \
  | grep -v -E "Warning|it/s|run/s" >> $OUT/sweeps.log || status=1; echo "[$SECONDS s] ${*:2}" | tee -a $OUT/sweeps.log; }
bench 60 --sweep money
bench 60 --sweep money --name money_run2 --no-plot
bench 150 --sweep headline            # the Gluon configs' first compiles: 60 s was cut short once
bench 330 --sweep reference --providers fa2,fa2_ch6,sdpa_flash,sdpa_cudnn
grep -E "geometric|fa2/" $OUT/sweeps.log | tail -20
exit $status
