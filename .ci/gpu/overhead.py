"""Where a small call's time goes (device tool): host time per call, timed call, and GPU-only time of each layer.

    python3 .ci/gpu/overhead.py OUT_DIR

For each shape (bf16): `fa2.attention` through its launch plan with host-side and with device-side TMA
descriptors, the pre-plan path (`api._forward`: JIT launch, host descriptors), and SDPA's FLASH and cuDNN
backends. Columns: `wall_us` = host time per call in a loop of calls (the GPU is faster than the host at these
shapes, so this is the host's cost), `bench_us` = what `python -m fa2.bench` measures (do_bench median over
rotated input sets), `gpu_us` = do_bench_cudagraph median (the launches captured in a CUDA graph: GPU time only).
Every fa2 output is checked against SDPA FLASH first. Writes OUT_DIR/overhead.csv.
"""
import csv
import math
import sys
import time

import torch
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import fa2
from fa2 import api
from fa2.bench import Shape, input_sets, time_ms

F = torch.nn.functional
SHAPES = [(1, 16, 512, 64), (1, 32, 512, 128), (8, 16, 512, 64), (8, 32, 512, 128), (1, 16, 2048, 64),
          (32, 16, 512, 64), (8, 32, 2048, 128), (8, 32, 8192, 128)]


def wall_us(fn, n=1000):
    for _ in range(50):
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


def main(out):
    rows = []
    providers = {
        "fa2 plan, host desc": 0,
        "fa2 plan, device desc": math.inf,
        "api._forward (no plan)": None,
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
                elif what is None:
                    call = lambda q, k, v: api._forward(q, k, v, causal, 1 / math.sqrt(D))[0]
                else:
                    api.HOST_DESC_MIN_FLOPS = what
                    api._PLANS.clear()
                    call = lambda q, k, v: fa2.attention(q, k, v, causal=causal)
                out_ = call(q, k, v)
                err = ((out_.float() - ref.float()).norm() / ref.float().norm()).item()
                assert math.isfinite(err) and err < 1e-2, (name, shape, err)
                if what is not None and not isinstance(what, SDPBackend):
                    plan = next(iter(api._PLANS.values()))
                    direct = getattr(getattr(plan, "launch", None), "compiled", None) is not None
                else:
                    direct = ""
                row = dict(B=B, H=H, N=N, D=D, causal=int(causal), provider=name,
                           wall_us=round(wall_us(lambda: call(q, k, v)), 1),
                           bench_us=round(time_ms(call, sets, 25, 100) * 1e3, 1),
                           gpu_us=round(triton.testing.do_bench_cudagraph(lambda: call(q, k, v), rep=50,
                                                                          return_mode="median") * 1e3, 1),
                           rel_err_vs_flash=f"{err:.1e}", direct_launch=direct)
                rows.append(row)
                print(" ".join(f"{v_}" for v_ in row.values()), flush=True)
    with open(f"{out}/overhead.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1])
