"""Programs of one or two warps where fa2.decode takes many splits, over the whole B = 1 row of the family (an H200).

    python gpu/decode_few_warps.py OUT [ROUNDS [B]]     # OUT/decode_few_warps.csv, a row per (shape, variant)

gpu/decode_warps.py (book/results/decode_warps.csv) found 32-key tiles in programs of two warps (4 stages) 2.3 %
faster than the shipped 64/4/3 launch at B = 1 with 128k keys (29 splits), and one warp (3 stages, 1.5x the
splits) 1 % faster at B = 8 with 4k keys. Before a rule "few warps where the split count is high" could ship, the
candidates run at every cache length of B = 1 and of B = 8, contiguous and paged (a paged launch gets
PAGED_EXTRA_STAGES more stages, as fa2.decode's does), beside the shipped launch and cuDNN (contiguous only) in
ROUNDS interleaved rounds (CUDA-graph replays, the median kept). Every variant is checked against the fp64
reference with ragged lengths and NaN past them (fa2.bench_decode.ragged_error).
"""

import csv
import sys
from pathlib import Path

import torch

import decode_explore as ex                         # plan_fn, environment, rounds_us
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding

SHAPES = [(B, N, p) for B in (1, 8) for N in (1024, 4096, 8192, 32768, 131072) for p in (0, 16, 256)]
SMOKE = [(2, 200, 0), (2, 200, 16)]
# name: (block_n, num_warps, num_stages on a contiguous cache, splits as a multiple of the shipped count)
CANDIDATES = {"n32w2s4": (32, 2, 4, 1.0), "n32w1s3_x1.5": (32, 1, 3, 1.5), "n32w2s4_x2": (32, 2, 4, 2.0)}
COLUMNS = ["B", "N", "layout", "variant", "block_n", "num_warps", "num_stages", "num_splits", "gpu_us", "round_us",
           "vs_shipped", "vs_cudnn", "rel_err_ragged", "check", "device", "torch", "triton", "command"]


def main(out, rounds=5, batch=None):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    kw = {} if gpu else dict(Hq=4, Hkv=2, D=32)
    with open(out / "decode_few_warps.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        context = ex.environment()
        for B, N, page in (SHAPES if gpu else SMOKE):
            if batch is not None and B != batch:            # B: only that batch size's rows
                continue
            shape = bd.DecodeShape(B, N, page, **kw)
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            x = sets[0]
            shipped = ex.decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
            extra = ex.decoding.PAGED_EXTRA_STAGES if page else 0
            variants = {"shipped": (None, None)}
            for name, (bn, w, s, times) in CANDIDATES.items():
                bn = bn if gpu else 16
                splits = min(ex.decoding.MAX_SPLITS, max(1, round(shipped * times)))
                variants[name] = (dict(block_n=bn, num_warps=w, num_stages=(s if gpu else 1) + extra), splits)
            fns = {name: ex.plan_fn(flash_decoding, x, cfg, splits) for name, (cfg, splits) in variants.items()}
            errors, times, med = ex.checked_medians(shape, sets, fns, rounds)
            names = list(times)
            line = f"{shape.name()} splits={shipped}:"
            for name in names:
                cfg, splits = variants.get(name, (None, None))
                writer.writerow(dict(
                    B=B, N=N, layout=shape.layout, variant=name,
                    num_splits=splits or (shipped if name in fns else ""),
                    **{k: (cfg or {}).get(k, "") for k in ("block_n", "num_warps", "num_stages")},
                    **ex.timed_columns(name, errors, times, med, "shipped"), **context))
                line += ex.summary(name, errors, med)
            f.flush()
            print(line, flush=True)
            del sets, x, fns
            if gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:4]))
