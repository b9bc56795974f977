# Sourced by the scripts that check new Gluon candidates by name and then time them (short_causal.sh, qahead.sh,
# half_diagonal.sh, q_early.sh, chain.sh, table_ahead.sh, nopp.sh, nopp_early.sh, pairplan.sh, short_table.sh,
# swap_rows.sh, one_loop.sh, rung3_persistent.sh, own_early.sh, rung3_x2.sh, o_in_q.sh, late_epilogue.sh,
# own_down.sh).
# They set OUT, and G (a scratch folder) and LOG with start_log (check_and_time calls it itself).

# start_log TAG: the scratch folder G (/tmp/gluon) and LOG ($OUT/TAG.log), which starts with the GPU's clocks,
# temperature and power.
start_log() {
  G=/tmp/gluon
  mkdir -p $G
  LOG=$OUT/$1.log
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $LOG
}

# check_named LIMIT NAME...: gpu/gluon_check.py's 96 fp64 cases for each named candidate of
# fa2/gluon/candidates.py (its rung and KEY=VALUE overrides), one process each, side by side, each under LIMIT
# seconds. PASSED: the names whose check passed. Logged to $LOG; the joined check and resource CSVs go to $OUT.
check_named() {
  local limit=$1 name spec rc
  shift
  local -A pid
  for name in "$@"; do
    spec=$(python3 -c "from fa2.gluon.candidates import CONFIGS; from fa2.gluon.dispatch import config_text
r, c = CONFIGS['$name']; print(r, config_text(c))")
    echo "$name: check $spec" | tee -a $LOG
    timeout -k 5 $limit python3 gpu/gluon_check.py check $G $spec > $G/check_$name.log 2>&1 &
    pid[$name]=$!
  done
  PASSED=""
  for name in "$@"; do
    wait ${pid[$name]}; rc=$?
    echo "$name: check rc $rc, $(tail -1 $G/check_$name.log)" | tee -a $LOG
    [ $rc -eq 0 ] && PASSED="$PASSED $name"
  done
  grep -h "fail\|Error" $G/check_*.log | head -5 | tee -a $LOG
  python3 gpu/gluon_check.py summary $G > /dev/null 2>&1
  cp $G/gluon_check.csv $G/gluon_resources.csv $OUT/ 2>/dev/null
}

# ab_twice TAG LIMIT NAMES SHAPES: two runs of gpu/money_ab.py (5 interleaved rounds) with the comma list NAMES at
# the comma list SHAPES, each under LIMIT seconds, into $OUT/TAG_ab_1.csv and $OUT/TAG_ab_2.csv.
ab_twice() {
  local i
  for i in 1 2; do
    mkdir -p /tmp/ab$i
    timeout -k 5 $2 python3 gpu/money_ab.py /tmp/ab$i 5 $3 $4 > /tmp/ab$i.log 2>&1
    echo "[${SECONDS}s] run $i rc $?" | tee -a $LOG
    cp /tmp/ab$i/money_ab.csv $OUT/$1_ab_$i.csv
  done
}

# check_and_time TAG "NEW ..." BASELINES SHAPES [LIMIT]: the NEW candidates against fp64 -- check_named's 96 cases and
# gpu/gluon_window.py's 12 window cases, side by side -- then ab_twice TAG with the comma list BASELINES and the
# candidates that passed both (BOTH, for the caller's later steps), at the comma list SHAPES. Logged to
# $OUT/TAG.log; the window check goes to $OUT/gluon_window_check.csv. (half_diagonal.sh, q_early.sh, chain.sh,
# table_ahead.sh, nopp.sh, nopp_early.sh, pairplan.sh); each timing run under LIMIT seconds (default 100).
check_and_time() {
  local tag=$1 new=$2 K=$3 shapes=$4 limit=${5:-100} name pw
  start_log $tag
  timeout -k 5 200 python3 gpu/gluon_window.py $G 180 ${new// /,} > $G/window.log 2>&1 &
  pw=$!
  check_named 200 $new
  wait $pw
  grep "passed every case" $G/window.log | tee -a $LOG
  BOTH=""
  for name in $PASSED; do
    grep "passed every case" $G/window.log | grep -q "'$name'" && BOTH="$BOTH $name" && K=$K,$name
  done
  grep -h "fail\|Error" $G/window.log | head -5 | tee -a $LOG
  cp $G/gluon_window_check.csv $OUT/ 2>/dev/null
  echo "[${SECONDS}s] timing: $K" | tee -a $LOG
  ab_twice $tag $limit $K $shapes
}

# rebuild_table NEWER_CSV...: the Gluon table rebuilt from the runs the shipped one names (its reference run, the
# other runs, the interleaved runs), the NEWER_CSV interleaved runs deciding the shapes they timed (--newer);
# the lines of the shapes interleaved runs decide go to $LOG, the table to $OUT. (short_table.sh, split_tail.sh)
rebuild_table() {
  local R=book/results T=fa2/configs/NVIDIA_H200.gluon.json
  local list="import json, sys; print(' '.join('$R/' + n for n in json.load(open('$T'))[sys.argv[1]]))"
  python3 -m fa2.gluon.dispatch $R/$(python3 -c "import json; print(json.load(open('$T'))['source'])") $T \
    $(python3 -c "$list" others) --interleaved $(python3 -c "$list" interleaved) --newer "$@" 2>&1 \
    | grep -E "measured shapes|interleaved runs" | tee -a $LOG
  cp $T $OUT/
}
