"""A persistent split-KV grid for fa2.decode: every program the same share of work, one or two programs an SM (an H200).

    python gpu/decode_persistent.py OUT [ROUNDS]     # OUT/decode_persistent.csv, a row per (shape, variant)

At long caches fa2.decode launches about 256 programs (B·Hkv·splits) of 128 threads, as cuDNN does, and both read
at 96-98 % of HBM peak; cuDNN stays 0.1-1.5 % ahead at B = 8 and 32 (book/results/decode.csv,
decode_warps.md). 256 programs on 132 SMs put two programs on 124 SMs and one on 8, and 512 K and V streams in
flight at once. Here a mutant of chapter 9's kernel wraps its body in a loop over work items (batch row, KV head,
split): item = program, program + P, ... for a grid of P programs, so that with P = 128 or 132·c and a split count
that makes the items a multiple of P, every program reads the same number of keys, each SM runs one (or two)
programs, and fewer streams are open at a time. Variants: (P, splits, block_n, warps, stages, runs or interleaved
tiles) per shape; the shipped launch and 128/4/2 (one program per item) and cuDNN beside them, ROUNDS interleaved
rounds (CUDA-graph replays, the median kept). Each variant is checked against the fp64 reference with ragged
lengths and NaN past them (fa2.bench_decode.ragged_error) before it is timed.
"""

import csv
import inspect
import sys
from pathlib import Path

import torch

import decode_explore as ex                         # plan_fn, environment, rounds_us
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant

SHAPES = [(32, 131072), (8, 131072), (32, 32768), (8, 32768), (32, 8192), (32, 4096), (8, 4096), (1, 131072)]
SMOKE = [(2, 200)]
COLUMNS = ["B", "N", "variant", "programs", "num_splits", "block_n", "num_warps", "num_stages", "interleaved",
           "gpu_us", "round_us", "vs_shipped", "vs_cudnn", "rel_err_ragged", "check", "device", "torch", "triton",
           "command"]


def _persistent_source():
    """{old: new} for fa2.testing.mutant: the split-KV kernel's body inside a loop over work items."""
    source = inspect.getsource(flash_decoding)
    start = source.index("    pid_bkv = tl.program_id(0)")
    end = source.index("\n\n# %%", start)
    body = source[start:end]
    assert "return" not in body and "tl.program_id(" in body
    head = ("    for item in range(tl.program_id(0), total_items, tl.num_programs(0)):   # persistent\n"
            "        pid_bkv = item // num_splits\n"
            "        split = item % num_splits\n"
            "        pid_m = 0\n")
    lines = body.splitlines(keepends=True)[3:]       # the three program_id lines are replaced by the head
    assert all("program_id" not in line for line in lines)
    wrapped = head + "".join(("    " + line) if line.strip() else line for line in lines)
    signature_end = "INTERLEAVED: tl.constexpr,\n    USE_PDL: tl.constexpr,\n):"
    with_items = signature_end.replace("USE_PDL: tl.constexpr,", "USE_PDL: tl.constexpr, total_items,")
    return {body: wrapped, signature_end: with_items}


PERSISTENT = mutant(flash_decoding, _persistent_source())


def persistent_fn(x, programs, splits, cfg, interleave):
    """o of a persistent launch: chapter 9's host launch (decode_launch) with the mutant kernel, `programs`
    programs, the item count appended; the combine as shipped."""
    q, k = x.q, x.k_cache
    B, H_Q, N_Q, D = q.shape
    assert decoding_m_tiles(q, k, cfg["block_n"]) == 1
    lse = torch.empty(B, H_Q, N_Q, device=q.device, dtype=torch.float32)
    part = (torch.empty(B, H_Q, N_Q, splits, D, device=q.device, dtype=torch.float32),
            torch.empty(B, H_Q, N_Q, splits, device=q.device, dtype=torch.float32)) if splits > 1 else (None, None)

    def run(x):
        o = torch.empty_like(x.q)
        launches = flash_decoding.decode_launch(
            x.q, x.k_cache, x.v_cache, x.cache_seqlens, None, o, lse, *part, D ** -0.5, splits, -1, 0.0,
            cfg["block_n"], cfg["num_warps"], cfg["num_stages"], interleave=interleave)
        (_, grid, args, options), *combine = launches
        items = grid[0] * grid[1]
        PERSISTENT._split_kv_kernel[(programs, 1, 1)](*args, items, **options)
        for kernel, grid, args, options in combine:
            kernel[grid](*args, **options)
        return o
    return run


def decoding_m_tiles(q, k, block_n):
    return flash_decoding.decode_tiles(q, k, None, block_n)[1]


def variants(B, Hkv, gpu):
    """(name, programs, splits, cfg, interleave) to time at B rows of Hkv heads."""
    rows = B * Hkv
    out = []
    if not gpu:
        return [("p3_x2", 3, 2, dict(block_n=16, num_warps=4, num_stages=1), False),
                ("p4_x1", 4, 1, dict(block_n=16, num_warps=4, num_stages=1), False)]
    grids = []
    for programs in (128, 132, 264):
        splits = next(s for s in range(1, 200) if rows * s % programs == 0)
        grids.append((programs, splits))
    for programs, splits in grids:
        for bn, w, s in ((64, 4, 3), (128, 4, 2), (128, 4, 3), (128, 8, 3)):
            if programs == 264 and (bn, s) == (128, 3):
                continue                       # two programs an SM: 128-key tiles fit two stages only
            for interleave in ((False, True) if splits >= 8 else (False,)):
                name = f"p{programs}_x{splits}_n{bn}w{w}s{s}" + ("_dealt" if interleave else "")
                out.append((name, programs, splits, dict(block_n=bn, num_warps=w, num_stages=s), interleave))
    return out


def main(out, rounds=5):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    kw = {} if gpu else dict(Hq=4, Hkv=2, D=32)
    with open(out / "decode_persistent.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        context = ex.environment()
        for B, N in (SHAPES if gpu else SMOKE):
            shape = bd.DecodeShape(B, N, **kw)
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            x = sets[0]
            shipped = ex.decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
            fns = {"shipped": ex.plan_fn(flash_decoding, x, None, None)}
            meta = {"shipped": dict(num_splits=shipped)}
            if gpu:
                fns["n128w4s2"] = ex.plan_fn(flash_decoding, x, dict(block_n=128, num_warps=4, num_stages=2), None)
                meta["n128w4s2"] = dict(num_splits=shipped, block_n=128, num_warps=4, num_stages=2)
            for name, programs, splits, cfg, interleave in variants(B, shape.Hkv, gpu):
                fns[name] = persistent_fn(x, programs, splits, cfg, interleave)
                meta[name] = dict(programs=programs, num_splits=splits, interleaved=interleave, **cfg)
            errors, times, med = ex.checked_medians(shape, sets, fns, rounds, skip_failed=True)
            for name in fns.keys() | times.keys():
                writer.writerow(dict(B=B, N=N, variant=name, **meta.get(name, {}),
                                     **ex.timed_columns(name, errors, times, med, "shipped"), **context))
            f.flush()
            best = sorted((t, n) for n, t in med.items())[:4]
            print(f"B={B} N={N}: " + " | ".join(f"{n} {t:.2f}" for t, n in best)
                  + f" | shipped {med['shipped']:.2f}" + (f" cudnn {med['cudnn']:.2f}" if "cudnn" in med else "")
                  + "".join(f" FAIL {n}" for n, e in errors.items() if e > 1e-2), flush=True)
            del sets, x, fns
            if gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
