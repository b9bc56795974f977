"""fa2.decode with one or two warps per program, beside cuDNN at the long caches where cuDNN is ahead (an H200).

    python gpu/decode_warps.py OUT [ROUNDS [SECONDS]]     # OUT/decode_warps.csv, a row per (shape, variant, phase)

With four warps and a tile of 16 packed query rows, Triton lays the warps side by side along the keys: every
tile's row maximum and row sum cross warps through shared memory, and P is re-laid out for the second dot
through it too (14 bar.sync in the sm_90 PTX of the shipped 64/4/3 kernel). cuDNN's decode kernel at these
shapes (book/results/decode_cudnn_ncu.csv) also runs 128 threads, so the question is narrower: does a program of
one warp -- its own softmax, reductions by shuffles, 4 bar.sync, all of them the pipeline's -- stream the cache
faster once more programs (more splits) fill the SMs? Explored: a grid of (block_n, warps, stages) with one or
two warps, each at several split counts, timed once (phase "grid", checked against the shipped launch's output);
then the three fastest, the shipped launch, 128/4/2 and cuDNN in ROUNDS interleaved rounds (phase "final"),
each finalist checked against the fp64 reference with ragged lengths and NaN past them
(fa2.bench_decode.ragged_error). The run stops starting new shapes after SECONDS.
"""

import csv
import sys
import time
from pathlib import Path

import torch

import decode_explore as ex                         # plan_fn, environment, rounds_us
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import rel_err

SHAPES = [(32, 131072), (8, 131072), (1, 131072), (32, 8192), (8, 32768), (32, 32768), (32, 4096), (8, 4096)]
SMOKE = [(2, 200)]
FEW_WARPS = [(32, 1, 3), (32, 1, 4), (64, 1, 2), (64, 1, 3), (128, 1, 2), (32, 2, 4), (64, 2, 3), (128, 2, 2)]
CPU_CONFIGS = [(16, 1, 1), (16, 2, 1)]
COLUMNS = ["phase", "B", "N", "variant", "block_n", "num_warps", "num_stages", "num_splits", "gpu_us", "round_us",
           "vs_shipped", "vs_cudnn", "rel_err", "check", "device", "torch", "triton", "command"]


def split_choices(shipped, B):
    """Split counts to try: the shipped one and more (fewer warps per program want more programs)."""
    if shipped == 1:
        return (1, 2, 3, 4, 6)
    return tuple(sorted({max(1, shipped // 2), shipped, shipped * 3 // 2, shipped * 2, min(128, shipped * 3)}))


def main(out, rounds=5, seconds=420.0):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    kw = {} if gpu else dict(Hq=4, Hkv=2, D=32)
    start = time.perf_counter()
    with open(out / "decode_warps.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        context = ex.environment()
        for B, N in (SHAPES if gpu else SMOKE):
            if time.perf_counter() - start > seconds:
                print(f"time's up before B={B} N={N}", flush=True)
                break
            shape = bd.DecodeShape(B, N, **kw)
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            x = sets[0]
            shipped_splits = ex.decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
            shipped_fn = ex.plan_fn(flash_decoding, x, None, None)
            expected = shipped_fn(x).float()
            base = dict(B=B, N=N, **context)
            grid = []
            for bn, w, s in (FEW_WARPS if gpu else CPU_CONFIGS):
                for splits in split_choices(shipped_splits, B):
                    cfg = dict(block_n=bn, num_warps=w, num_stages=s)
                    try:
                        fn = ex.plan_fn(flash_decoding, x, cfg, splits)
                        err = rel_err(fn(x).float(), expected)
                        us = bd.gpu_time_us(fn, sets)[0]
                    except Exception as error:          # out of shared memory and the like: note it, go on
                        print(f"  B={B} N={N} {cfg} {splits}: {type(error).__name__} {error}"[:300], flush=True)
                        continue
                    name = f"n{bn}w{w}s{s}_x{splits}"
                    if err <= 1e-2:
                        grid.append((us, name, cfg, splits))
                    writer.writerow(dict(base, phase="grid", variant=name, block_n=bn, num_warps=w, num_stages=s,
                                         num_splits=splits, gpu_us=f"{us:.4g}", rel_err=f"{err:.1e}",
                                         check="ok" if err <= 1e-2 else "fail"))
            f.flush()
            ok = sorted(grid, key=lambda g: g[0])           # the ones that matched the shipped output, fastest first
            finalists = {"shipped": (None, None)}
            if gpu:
                finalists["n128w4s2"] = (dict(block_n=128, num_warps=4, num_stages=2), None)
            for _, name, cfg, splits in ok[:3]:
                finalists[name] = (cfg, splits)
            fns = {name: ex.plan_fn(flash_decoding, x, cfg, splits) for name, (cfg, splits) in finalists.items()}
            errors, times, med = ex.checked_medians(shape, sets, fns, rounds)
            names = list(times)
            line = f"B={B} N={N} shipped splits={shipped_splits}:"
            for name in names:
                cfg, splits = finalists.get(name, (None, None))
                writer.writerow(dict(
                    base, phase="final", variant=name, num_splits=splits or (shipped_splits if name in fns else ""),
                    **{k: (cfg or {}).get(k, "") for k in ("block_n", "num_warps", "num_stages")},
                    **ex.timed_columns(name, errors, times, med, "shipped", err_column="rel_err")))
                line += ex.summary(name, errors, med)
            f.flush()
            print(line + f"  [{time.perf_counter() - start:4.0f} s]", flush=True)
            del sets, x, fns, expected
            if gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]), *(float(a) for a in sys.argv[3:4]))
