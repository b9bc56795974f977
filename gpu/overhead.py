"""Where a small call's time goes (device tool): host time per call, timed call, and GPU-only time of each layer.

    python3 gpu/overhead.py OUT_DIR [--no-configs]

For each shape (bf16): `fa2.attention` as shipped, its launch plan forced to host-side and to device-side TMA
descriptors, and SDPA's FLASH and cuDNN backends. Columns: `wall_us` = host time per call in a loop of calls (the GPU is faster than the host at these
shapes, so this is the host's cost), `bench_us` = what `python -m fa2.bench` measures (fa2.testing.time_ms over
rotated input sets), `gpu_us` = `time_ms(..., cuda_graph=True)` (the launches captured in a CUDA graph: GPU time only).
Every fa2 output is checked against SDPA FLASH first. Writes OUT_DIR/overhead.csv, then OUT_DIR/small_configs.csv:
the GPU-only time of several configs at shapes whose grid has fewer programs than the GPU has SMs.
"""
import csv
import math
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import fa2
from fa2 import plan as plans
from fa2.bench import Shape, input_sets
from fa2.dispatch import select_config
from fa2.plan import FastPlan
from fa2.testing import rel_err, time_ms

F = torch.nn.functional
SHAPES = [(1, 16, 512, 64), (1, 32, 512, 128), (8, 16, 512, 64), (8, 32, 512, 128), (1, 16, 2048, 64),
          (32, 16, 512, 64), (8, 32, 2048, 128)]
SMALL = [(1, 16, 512, 64), (1, 32, 512, 128), (8, 16, 512, 64), (1, 16, 2048, 64)]   # fewer programs than SMs
CONFIGS = [dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=4, num_stages=s)
           for bm, bn, s in ((64, 64, 2), (64, 64, 3), (64, 128, 2), (128, 64, 2), (128, 64, 3), (64, 32, 3))]


def wall_us(fn, n=1000, warmup=50):
    """Host µs per call of fn() over n calls in a loop, after `warmup` calls (the GPU drained before and after)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def main(out, configs=True):
    rows = []
    providers = {
        "fa2.attention": "api",
        "fa2 plan, host desc": True,
        "fa2 plan, device desc": False,
        "sdpa flash": SDPBackend.FLASH_ATTENTION,
        "sdpa cudnn": SDPBackend.CUDNN_ATTENTION,
    }
    for (B, H, N, D) in SHAPES:
        for causal in (True, False):
            shape = Shape(B, H, H, N, D, causal, "bf16")
            sets = input_sets(shape, torch.Generator("cuda").manual_seed(0))
            q, k, v = sets[0]
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            for name, what in providers.items():
                if isinstance(what, SDPBackend):
                    call = lambda q, k, v, b=what: sdpa(b)(q, k, v, causal)
                elif what == "api":
                    plans.PLANS.clear()
                    call = lambda q, k, v: fa2.attention(q, k, v, causal=causal)
                else:                                 # the config fa2.attention chooses, descriptors forced
                    cfg = select_config("fast", q, k, v, causal, 1 / math.sqrt(D))
                    plan = FastPlan(q, k, v, causal, 1 / math.sqrt(D), cfg, host_desc=what)
                    call = lambda q, k, v, plan=plan: plan(q, k, v)[0]
                out_ = call(q, k, v)
                err = rel_err(out_, ref)
                assert math.isfinite(err) and err < 1e-2, (name, shape, err)
                if what == "api":
                    plan = next(iter(plans.PLANS.values()))
                if not isinstance(what, SDPBackend):
                    direct = getattr(getattr(plan, "launch", None), "compiled", None) is not None
                else:
                    direct = ""
                row = dict(B=B, H=H, N=N, D=D, causal=int(causal), provider=name,
                           wall_us=round(wall_us(lambda: call(q, k, v)), 1),
                           bench_us=round(time_ms(call, sets, 25, 100) * 1e3, 1),
                           gpu_us=round(time_ms(call, [(q, k, v)], rep_ms=30, cuda_graph=True) * 1e3, 1),
                           rel_err_vs_flash=f"{err:.1e}", direct_launch=direct)
                rows.append(row)
                print(" ".join(f"{v_}" for v_ in row.values()), flush=True)
    write(f"{out}/overhead.csv", rows)
    if not configs:
        return
    # GPU-only time of each config where the grid has fewer programs than the GPU has SMs
    rows = []
    for (B, H, N, D) in SMALL:
        for causal in (True, False):
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            chosen = select_config("fast", q, k, v, causal, 1 / math.sqrt(D))
            for cfg in CONFIGS:
                for host_desc in (True, False):
                    plan = FastPlan(q, k, v, causal, 1 / math.sqrt(D), cfg, host_desc)
                    o = plan(q, k, v)[0]
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    assert rel_err(o, ref) < 1e-2, (cfg, B, N)
                    us = time_ms(plan, [(q, k, v)], rep_ms=30, cuda_graph=True) * 1e3
                    rows.append(dict(B=B, H=H, N=N, D=D, causal=int(causal), host_desc=int(host_desc),
                                     **cfg, gpu_us=round(us, 1), shipped=int(all(chosen.get(a) == b for a, b in cfg.items()))))
                    print(" ".join(f"{v_}" for v_ in rows[-1].values()), flush=True)
    write(f"{out}/small_configs.csv", rows)


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1], configs="--no-configs" not in sys.argv[2:])
