#!/bin/bash
# Chapter 8 on the GPU machine: the ceilings, every case's time, and Nsight Compute's metrics of every case.
#   device tool: command "bash gpu/profile.sh" (nothing to carry); bounded to about 5 minutes.
# Four files come back in $OUT: profile_ceilings.csv, profile_metrics.csv, profile_configs.csv, profile.log.
# Copy the three CSVs into book/results/, then execute book/08_profiling.ipynb (it reads them).
set -o pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/fa2-profile}
mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  ncu --version | tail -1
  # --budget-s: no new ncu run starts after 270 s; timeout is the backstop
  timeout --kill-after=10 320 python3 -m fa2.profile --out "$OUT" --budget-s 270
} 2>&1 | tee "$OUT/profile.log"
