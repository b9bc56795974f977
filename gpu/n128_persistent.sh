#!/bin/bash
# On the GPU machine (~7 min on an H200): the persistent Gluon config with 128-key tiles (r4_n128b2_pingpong_persistent)
# against fp64 (gpu/gluon_check.py's 96 cases, <= 280 s), then, if it passed, gpu/money_ab.py's interleaved rounds at
# (8, 32, 2048, 128) and (1, 32, 8192, 128) bf16 causal beside chapter 6's kernel, fa2.attention, cuDNN and the
# other two rung-4 configs (5 rounds, <= 240 s). Results under $OUT: n128p.log, gluon_check.csv, money_ab.csv
source gpu/env.sh || exit 1
SECONDS=0
status=0
G=$OUT/gluon
mkdir -p $G
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/n128p.log
P="BLOCK_N=128 NUM_BUFFERS=2 PINGPONG=1 PERSISTENT=1 PRODUCER_REGS=32"
timeout -k 5 280 python3 gpu/gluon_check.py check $G 4 $P > $G/check.log 2>&1
rc=$?
tail -1 $G/check.log | tee -a $OUT/n128p.log
cp $G/gluon_check_*.csv $OUT/ 2>/dev/null
echo "[${SECONDS}s] check rc $rc" | tee -a $OUT/n128p.log
if [ $rc -eq 0 ]; then
  timeout -k 5 240 python3 gpu/money_ab.py $OUT 5 \
    r4_n64b3_pingpong_persistent,r4_n128b2_pingpong_persistent,r4_n128b2_pingpong > $G/ab.log 2>&1 || status=1
  tail -3 $G/ab.log | tee -a $OUT/n128p.log
else
  status=1
fi
echo "[${SECONDS}s] done, status $status" | tee -a $OUT/n128p.log
exit $status
