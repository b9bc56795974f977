"""In what order a split reads its key tiles, and what the softmax costs, at the long decode caches (an H200).

    python gpu/decode_order.py OUT [ROUNDS]     # OUT/decode_order.csv, a row per (shape, variant)

At B = 8 and 32 with 4k keys or more fa2.decode and SDPA's cuDNN backend both stream K and V at ~95 % of HBM
peak, cuDNN 0.3-1.1 % ahead (book/results/decode.csv). Fitting time against N at B = 32 puts the difference in
the steady-state rate, not in a fixed cost per call. In chapter 9's kernel every program starts at the first
tile of its run and all ~256 programs advance in step, so at any moment they all read the same offset of their
own row. Variants (mutants of chapter 9's module, launched through DecodePlan):
- "rot": program p of P starts its run at tile p·n/P (n tiles in its run) and wraps around, so the programs'
  read positions are spread over the row instead of moving in step;
- "rev": odd programs read their run backwards;
- "nosoftmax": no row max, no exp2, no rescale (P = S): wrong answers, not checked, timed to show what the
  softmax's cross-warp reductions cost while the loads stream;
each with the shipped config and (rot) with 128-key tiles in two stages; the shipped launch, 128/4/2 and cuDNN
beside them, ROUNDS interleaved rounds of CUDA-graph replays, the median kept. Every variant but nosoftmax is
checked against the fp64 reference with ragged lengths and NaN past them (fa2.bench_decode.ragged_error) before
it is timed; one that fails is not timed.
"""

import csv
import statistics
import sys
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

import decode_explore as ex                         # plan_fn, environment, rounds_us, timed_columns
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant

SHAPES = [(32, 4096), (32, 8192), (8, 4096), (32, 32768), (8, 32768), (8, 131072), (32, 131072)]
SMOKE = [bd.DecodeShape(2, 200, Hq=4, Hkv=2, D=32), bd.DecodeShape(3, 130, Hq=8, Hkv=2, D=32, N_Q=4)]
COLUMNS = ["B", "N", "variant", "block_n", "num_warps", "num_stages", "gpu_us", "round_us", "vs_shipped",
           "vs_cudnn", "rel_err_ragged", "check", "device", "torch", "triton", "command"]

_LOOP = ("    for kv_tile_start in range(split_start, split_end, step):\n"
         "        kv_idx = kv_tile_start + offs_n                                # (BLOCK_N,)\n")
_COUNT = "    n_here = tl.cdiv(split_end - split_start, step)                  # this program's tiles\n"
ROTATED = mutant(flash_decoding, {_LOOP: _COUNT + (
    "    programs = tl.num_programs(0) * tl.num_programs(1)\n"
    "    rot = ((pid_bkv * tl.num_programs(1) + split) * n_here) // programs   # where this program starts\n"
    "    for t in range(0, n_here):\n"
    "        tt = t + rot\n"
    "        tt = tl.where(tt >= n_here, tt - n_here, tt)\n"
    "        kv_tile_start = split_start + tt * step\n"
    "        kv_idx = kv_tile_start + offs_n                                # (BLOCK_N,)\n")})
REVERSED = mutant(flash_decoding, {_LOOP: _COUNT + (
    "    odd = (pid_bkv % 2) == 1\n"
    "    for t in range(0, n_here):\n"
    "        kv_tile_start = split_start + tl.where(odd, n_here - 1 - t, t) * step\n"
    "        kv_idx = kv_tile_start + offs_n                                # (BLOCK_N,)\n")})
NO_SOFTMAX = mutant(flash_decoding, {
    "m_new = tl.maximum(row_max, tl.max(scores, axis=1))           # (BLOCK_M,)": "m_new = row_max",
    "p = tl.math.exp2(scores - m_safe[:, None])               # (BLOCK_M, BLOCK_N)": "p = scores",
    "row_sum = row_sum * alpha + tl.sum(p, axis=1)": "row_sum = row_sum + 1.0",
    "acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])     # (BLOCK_M, HEAD_DIM)":
        "acc = tl.dot(p.to(v.dtype), v, acc)"})

N128 = dict(block_n=128, num_warps=4, num_stages=2)
UNCHECKED = {"nosoftmax"}


def variants(gpu):
    """{name: (module, config or None for the shipped one)}."""
    out = {"shipped": (flash_decoding, None), "rot": (ROTATED, None), "rev": (REVERSED, None),
           "nosoftmax": (NO_SOFTMAX, None)}
    if gpu:
        out.update({"n128w4s2": (flash_decoding, N128), "rot_n128w4s2": (ROTATED, N128)})
    else:
        out["rot_n16"] = (ROTATED, dict(block_n=16, num_warps=4, num_stages=1))
    return out


def main(out, rounds=5):
    measure(out, "decode_order.csv", variants, UNCHECKED, rounds)


def measure(out, csv_name, variants, unchecked, rounds=5):
    """Check (all but `unchecked`) and time `variants(gpu)` beside cuDNN at SHAPES (the CPU: SMOKE), one row per
    (shape, variant) in OUT/csv_name."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    shapes = [bd.DecodeShape(B, N) for B, N in SHAPES] if gpu else SMOKE
    context = ex.environment()
    with open(out / csv_name, "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        for shape in shapes:
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            x = sets[0]
            table = variants(gpu)
            fns = {name: ex.plan_fn(module, x, cfg, None) for name, (module, cfg) in table.items()}
            fresh = bd.make_inputs(shape, torch.Generator(runtime.DEVICE).manual_seed(1))
            errors = bd.ragged_error(fresh, torch.Generator(runtime.DEVICE).manual_seed(2),
                                     {n: fn for n, fn in fns.items() if n not in unchecked})
            del fresh
            timed = {n: fn for n, fn in fns.items() if n in unchecked or errors[n] <= 1e-2}
            if gpu:
                timed["cudnn"] = bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, sets)
            names = list(timed)
            times = dict(zip(names, ex.rounds_us([(timed[n], sets) for n in names], rounds if gpu else 1)))
            med = {n: statistics.median(t) for n, t in times.items()}
            for name in names + [n for n in fns if n not in timed]:
                cfg = table.get(name, (None, None))[1] or {}
                writer.writerow(dict(B=shape.B, N=shape.N, variant=name, **cfg,
                                     **ex.timed_columns(name, errors, times, med, "shipped"), **context))
            f.flush()
            print(f"B={shape.B} N={shape.N}: " + " | ".join(f"{n} {med[n]:.2f}" for n in names)
                  + "".join(f" FAIL {n} {e:.1e}" for n, e in errors.items() if e > 1e-2), flush=True)
            del sets, x, fns, timed
            if gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
