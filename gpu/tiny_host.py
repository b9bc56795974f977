"""Host time against GPU time at the reference sweep's smallest shapes (N = 512), where the Gluon table and chapter
6's kernel disagree from run to run (book/results/reference_n512.csv).

    python gpu/tiny_host.py OUT [ROUNDS]      # OUT/tiny_host.csv: a row per (shape, round, provider)

Providers: fa2.attention as shipped (its plan's kernel in column `kernel`), chapter 6's kernel alone (fa2_ch6),
SDPA cuDNN. In each of ROUNDS interleaved rounds (the order rotated) every provider is timed three ways:
`bench_us` what `python -m fa2.bench` measures (fa2.testing.time_ms: do_bench, host time included), `gpu_us`
the same calls replayed from a CUDA graph (GPU time only), `wall_us` host time per call in a loop of 2000
calls (the host's cost when it is slower than the GPU). Every output is compared with SDPA FLASH's first.
"""

import csv
import sys
import time
from pathlib import Path

import torch

from fa2 import bench as fb
from fa2 import plan as fa2_plan
from fa2.testing import rel_err, time_ms

SHAPES = [(1, 16, 512, 64), (1, 32, 512, 128), (8, 16, 512, 64)]
PROVIDERS = ("fa2", "fa2_ch6", "sdpa_cudnn")


def wall_us(fn, sets, n=2000):
    for i in range(50):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(n):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n * 1e6


def main(out, rounds=3):
    known = fb.all_providers()
    path = Path(out) / "tiny_host.csv"
    flash = known["sdpa_flash"]
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["B", "H", "N", "D", "dtype", "causal", "round", "provider", "kernel", "bench_us", "gpu_us",
                         "wall_us", "rel_err_vs_flash", "device", "torch", "command"])
        for B, H, N, D in SHAPES:
            for dtype in ("fp16", "bf16"):
                for causal in (True, False):
                    shape = fb.Shape(B=B, H=H, Hkv=H, N=N, D=D, dtype=dtype, causal=causal)
                    sets = [[torch.randn(B, H, N, D, device="cuda", dtype=fb.DTYPES[dtype]) for _ in range(3)]
                            for _ in range(8)]
                    with flash.context():
                        expected = flash.build(shape)(*sets[0])
                    fns = []
                    for name in PROVIDERS:
                        p = known[name]
                        with p.context():
                            fn = p.build(shape)
                            err = rel_err(fn(*sets[0]), expected)
                        kernel = ""
                        if name == "fa2":
                            key = fa2_plan.signature(*sets[0], causal, None)
                            kernel = getattr(fa2_plan.PLANS.get(key), "kernel", "?")
                        fns.append((p, fn, err, kernel))
                    for r in range(rounds):
                        for p, fn, err, kernel in fns[r % len(fns):] + fns[:r % len(fns)]:
                            with p.context():
                                bench = time_ms(fn, sets) * 1e3
                                gpu = time_ms(fn, sets, cuda_graph=True) * 1e3
                                wall = wall_us(fn, sets)
                            writer.writerow([B, H, N, D, dtype, causal, r, p.name, kernel, f"{bench:.2f}",
                                             f"{gpu:.2f}", f"{wall:.2f}", f"{err:.2e}", torch.cuda.get_device_name(),
                                             torch.__version__, f"python gpu/tiny_host.py OUT {rounds}"])
                            file.flush()
                            print(f"{(B, H, N, D, dtype, causal)} r{r} {p.name:12s} {kernel:6s} bench {bench:7.2f}"
                                  f" gpu {gpu:7.2f} wall {wall:7.2f} us err {err:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3))
