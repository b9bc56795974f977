"""The windowed one-tile grid's program order, before and after (chapter 12's Gluon kernel, an H200).

    python gpu/window_order.py OUT [ROUNDS] [NAME,...]     # OUT/window_order.csv

The window problem of the issue (B=1, H=16, N=32768, D=128, bf16, causal, window (4096, 0)): each window-family
config with the kernel's order (`_window_order`: whole windows head by head, then the cut-off tiles longest first)
and with the grid's old order (a mutant of fa2.gluon.attention_hopper: every head's tiles last first), both
through attention_gluon, and FlexAttention with a sliding-window block mask, in ROUNDS interleaved rounds (the
order rotated each round); every output checked against fp64 on row blocks first (fa2.bench_dropin).
"""

import csv
import statistics
import sys
from pathlib import Path

import torch

from fa2 import bench_dropin as bd
from fa2.gluon import attention_hopper
from fa2.gluon.candidates import CONFIGS
from fa2.testing import mutant, rel_err, time_ms

NEW = """    if WINDOW:                      # whole windows head by head, then the cut-off tiles, longest first
        pid_m, pid_bh = _window_order(pid_m, pid_bh, gl.num_programs(0), gl.num_programs(1), N_Q, N_KV,
                                      window_left, BLOCK_M)
    elif IS_CAUSAL:                 # the longest query tiles start first"""
OLD = """    if IS_CAUSAL:                   # the longest query tiles start first"""
NAMES = ("r4_n64b3_pingpong", "r4_n128b2_pingpong", "r1_m128n64b2w4")


def main(out, rounds=3, names=NAMES):
    out = Path(out)
    old = mutant(attention_hopper, {NEW: OLD})
    problem = bd.window_problems()[0]
    assert problem.window == (4096, 0), problem
    x = bd.make_inputs(problem, torch.Generator("cuda").manual_seed(0))
    q, k, v = x.bhnd
    fns = {}
    for name in names:
        rung, config = CONFIGS[name]
        for order, module in (("window_order", attention_hopper), ("old_order", old)):
            fns[(name, order)] = (lambda module=module, rung=rung, config=config: module.attention_gluon(
                q, k, v, True, None, rung=rung, config=config, window_left=4096)[0])
    flex, flex_packed = bd.build_flex(problem, x)
    fns[("flex", "")] = flex
    ref_rows, ref = bd.reference(problem, x)
    errors = {}
    for key, fn in fns.items():                     # checked before timing: (B, H, N, D) -> packed (B·N, H, D) rows
        packed = flex_packed if key[0] == "flex" else (lambda o: o.transpose(1, 2).flatten(0, 1))
        err = rel_err(packed(fn())[ref_rows], ref)
        errors[key] = f"ok {err:.2e}" if err <= bd.MAX_REL_ERR else f"FAIL {err:.2e}"
        print(key, errors[key], flush=True)
    times = {key: [] for key in fns}
    keys = list(fns)
    for r in range(rounds):
        for key in keys[r % len(keys):] + keys[:r % len(keys)]:
            times[key].append(time_ms(fns[key]))
            print(f"round {r} {key[0]:22s} {key[1]:13s} {times[key][-1]:.4f} ms", flush=True)
    flex = statistics.median(times[("flex", "")])
    rows = []
    for key, ts in times.items():
        med = statistics.median(ts)
        rows.append(dict(problem=problem.name(), config=key[0], order=key[1], median_ms=f"{med:.5g}",
                         min_ms=f"{min(ts):.5g}", max_ms=f"{max(ts):.5g}", rounds=len(ts),
                         flex_over_this=f"{flex / med:.4f}", tflops=f"{problem.tflops(med):.5g}",
                         check=errors[key], device=torch.cuda.get_device_name(), torch=torch.__version__,
                         command="python " + " ".join(sys.argv)))
    with open(out / "window_order.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(row["config"], row["order"], row["median_ms"], row["flex_over_this"])


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:3]), *[a.split(",") for a in sys.argv[3:4]])
