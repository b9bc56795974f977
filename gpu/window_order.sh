#!/bin/bash
# On the GPU machine (~8 min on an H200): the windowed grid's order (`_window_order`, chapter 12's Gluon kernel).
# 1. the window cases of gpu/gluon_window.py's check (fp64, 12 cases) for the three window-family configs (<= 330 s)
# 2. gpu/window_order.py: the window problem with the new order and the old (a mutant), FlexAttention beside them,
#    3 interleaved rounds (<= 200 s)
# Results under $OUT: gpu.txt, gluon_window_check.csv, check.log, window_order.csv, order.log
source gpu/env.sh || exit 1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/gpu.txt
status=0
timeout -k 10 330 python3 -c "
import sys; sys.path.insert(0, 'gpu')
import gluon_window as g
passed = g.check('$OUT', 300, ['r4_n64b3_pingpong', 'r4_n128b2_pingpong', 'r1_m128n64b2w4'])
print('passed every case:', sorted(passed))
sys.exit(0 if len(passed) == 3 else 1)" > $OUT/check.log 2>&1 || status=1
tail -3 $OUT/check.log
timeout -k 10 200 python3 gpu/window_order.py $OUT 3 > $OUT/order.log 2>&1 || status=1
tail -12 $OUT/order.log
exit $status
