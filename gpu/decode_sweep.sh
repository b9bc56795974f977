# Sourced by gpu/decode_fused.sh and gpu/decode_pdl.sh: decode_sweep CAP_S runs the quick decode sweep
# (FULL=1: the whole family) with --no-tune under a time limit of CAP_S seconds (SWEEP_S overrides it), writes
# $OUT/decode.{csv,log}, prints its summary (or, if it was cut short, the summary of the rows written so far)
# and returns 1 if it failed.
decode_sweep() {
  local quick=--quick rc=0
  [ "${FULL:-0}" = 1 ] && quick=
  timeout --kill-after=10 "${SWEEP_S:-$1}" python3 -m fa2.bench --sweep decode --no-tune $quick --no-plot \
    --out $OUT > $OUT/decode.log 2>&1 || rc=1
  if grep -q "^wrote .*decode.csv" $OUT/decode.log; then
    grep -v -E "Warning|it/s" $OUT/decode.log | tail -40
  else   # cut short: the summary of the rows written so far
    tail -5 $OUT/decode.log
    [ -s $OUT/decode.csv ] && python3 -c \
      "from fa2.bench_decode import read_rows, print_summary; print_summary(read_rows('$OUT/decode.csv'))"
  fi
  return $rc
}
