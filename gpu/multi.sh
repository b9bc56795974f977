#!/bin/bash
# Several GPU scripts in one device call: `bash gpu/multi.sh SECONDS:script.sh [SECONDS:script.sh ...]`.
# Each script runs with its own OUT folder ($OUT/<script name>) and its own time limit, so one that hangs cannot
# take the later ones with it; at the end everything is packed into $OUT/results.tgz (a device call brings back
# at most 8 files) beside $OUT/multi.log, which holds each script's tail and exit status.
export OUT=${OUT:-/tmp/fa2-out}
mkdir -p "$OUT"
status=0
SECONDS=0
for item in "$@"; do
  limit=${item%%:*}; script=${item#*:}; name=$(basename "$script" .sh)
  mkdir -p "$OUT/$name"
  echo "=== [$SECONDS s] $script (limit $limit s)" | tee -a "$OUT/multi.log"
  OUT="$OUT/$name" timeout -k 10 "$limit" bash "$script" > "$OUT/$name/stdout.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || status=1
  tail -25 "$OUT/$name/stdout.log" | tee -a "$OUT/multi.log"
  echo "=== [$SECONDS s] $script: exit $rc" | tee -a "$OUT/multi.log"
done
# packed outside $OUT first: tar of a folder it is writing into reports "file changed as we read it"
( cd "$OUT" && tar czf /tmp/multi-results.tgz --exclude=multi.log . && mv /tmp/multi-results.tgz results.tgz && \
  find . -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} + )
exit $status
