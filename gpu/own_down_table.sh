#!/bin/bash
# On the GPU machine (~6 min on an H200, after gpu/own_down.sh): OWN_RANGES=2 against the same rings in key
# order at the two N = 512 causal shapes, the Gluon table rebuilt with those runs, and the headline sweep with it.
#  1. gpu/gluon_check.py's 96 fp64 cases for the table's configs at (32, 32, 512, 128) and the money shot (the
#     ring's loads now go through _load_tile_at).
#  2. Three runs of gpu/money_ab.py (7 interleaved rounds) at (32, 32, 512, 128) and (8, 32, 512, 128) causal
#     bf16: the 4- and 5-deep 64-key rings in key order and from the diagonal down, the paired launch from the
#     diagonal down, rung 3 at two programs per SM (the table's config at the second shape), chapter 6's kernel,
#     the shipped choice and cuDNN.
#  3. The table rebuilt (rebuild_table: the shipped table's interleaved runs, its newer runs, gpu/own_down.sh's and
#     these three), then `python -m fa2.bench --sweep headline` with it, then 15 interleaved rounds of
#     fa2.attention and cuDNN at (32, 32, 512, 128) causal.
# Results under $OUT: own_down_table.log, gluon_check.csv, gluon_resources.csv, own_down_table_ab.tar (the three
# runs, book/results/gluon_own_down_table_ab_{1,2,3}.csv), NVIDIA_H200.gluon.json,
# headline_own_down.csv, own_down_rounds.csv
source gpu/env.sh || exit 1
source gpu/candidates.sh
SECONDS=0
start_log own_down_table
check_named 200 r4_n64b5_persistent_own_pairplan r4_n128b2_pingpong_persistent_split_half
K=r4_n64b4_persistent_own_pairplan,r4_n64b5_persistent_own_pairplan,r4_n64b4_persistent_own_pairplan_down
K=$K,r4_n64b5_persistent_own_pairplan_down,r4_n64b5_persistent_own_down,r3_m64n64b2_persistent_split_x2
for i in 1 2 3; do
  mkdir -p /tmp/ab$i
  timeout -k 5 120 python3 gpu/money_ab.py /tmp/ab$i 7 $K 32x32x512x128c,8x32x512x128c > /tmp/ab$i.log 2>&1
  echo "[${SECONDS}s] run $i rc $?" | tee -a $LOG
  cp /tmp/ab$i/money_ab.csv book/results/gluon_own_down_table_ab_$i.csv
done
tar -cf $OUT/own_down_table_ab.tar -C book/results gluon_own_down_table_ab_1.csv gluon_own_down_table_ab_2.csv \
  gluon_own_down_table_ab_3.csv
NEWER=$(python3 -c "import json; print(' '.join('book/results/' + n for n in json.load(open('fa2/configs/NVIDIA_H200.gluon.json'))['interleaved_newer']))")
rebuild_table $NEWER book/results/gluon_own_down_ab_1.csv book/results/gluon_own_down_ab_2.csv \
  book/results/gluon_own_down_table_ab_{1,2,3}.csv
git diff --stat fa2/configs/NVIDIA_H200.gluon.json | tee -a $LOG
python3 - <<'PY' | tee -a $LOG
import json, subprocess
old = json.loads(subprocess.run(["git", "show", "HEAD:fa2/configs/NVIDIA_H200.gluon.json"], capture_output=True,
                                text=True).stdout)["configs"]
new = json.load(open("fa2/configs/NVIDIA_H200.gluon.json"))["configs"]
for key in sorted(set(old) | set(new)):
    if old.get(key) != new.get(key):
        print("changed:", key, old.get(key), "->", new.get(key))
PY
echo "[${SECONDS}s] headline sweep" | tee -a $LOG
timeout -k 5 150 python3 -m fa2.bench --sweep headline --no-plot --name headline_own_down --out $OUT > /tmp/hl.log 2>&1
echo "[${SECONDS}s] headline rc $?" | tee -a $LOG
tail -3 /tmp/hl.log | tee -a $LOG
mkdir -p /tmp/r15
timeout -k 5 60 python3 gpu/money_ab.py /tmp/r15 15 r4_n64b4_persistent_own_pairplan_down 32x32x512x128c > /tmp/r15.log 2>&1
echo "[${SECONDS}s] rounds rc $?" | tee -a $LOG
cp /tmp/r15/money_ab.csv $OUT/own_down_rounds.csv
