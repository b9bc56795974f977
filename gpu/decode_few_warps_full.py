"""fa2.decode's two launch configs at B = 1 with and without cache_seqlens (an H200).

    python gpu/decode_few_warps_full.py OUT [ROUNDS]     # OUT/decode_few_warps_full.csv

Chapter 9's first timing cell calls fa2.decode without lengths (full rows: HAS_SEQLENS=False, a different
compiled kernel) and saw FEW_WARPS_CONFIG slower there than the runs with lengths that chose it
(book/results/decode_warps.md). Here GPU_CONFIG and FEW_WARPS_CONFIG at the same split count, with and without
cache_seqlens, at 4k-128k keys, in ROUNDS interleaved rounds (CUDA-graph replays, medians).
"""
import csv
import statistics
import sys
from pathlib import Path

import torch

import decode_explore as ex
from fa2 import bench_decode as bd
from fa2 import decoding, runtime


def main(out, rounds=5):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    kw = {} if gpu else dict(Hq=4, Hkv=2, D=32)
    lengths_n = (4096, 8192, 32768, 131072) if gpu else (200,)
    with open(out / "decode_few_warps_full.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["B", "N", "lengths", "config", "num_splits", "gpu_us", "round_us",
                                    "vs_gpu_config", "device", "torch", "triton", "command"])
        writer.writeheader()
        for N in lengths_n:
            shape = bd.DecodeShape(1, N, **kw)
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            x = sets[0]
            splits = decoding.choose_num_splits(x.q, x.k_cache)
            fns = {}
            for name, cfg in (("gpu_config", decoding.GPU_CONFIG), ("few_warps", decoding.FEW_WARPS_CONFIG)):
                cfg = dict(cfg) if gpu else dict(cfg, block_n=16)
                for with_lengths in (True, False):
                    lens = x.cache_seqlens if with_lengths else None
                    plan = decoding.DecodePlan(x.q, x.k_cache, x.v_cache, lens, None, shape.D ** -0.5, splits, -1,
                                               0.0, config=cfg)
                    fns[(name, with_lengths)] = (lambda x, plan=plan, w=with_lengths:
                                                 plan(x.q, x.k_cache, x.v_cache, x.cache_seqlens if w else None)[0])
            keys = list(fns)
            times = dict(zip(keys, ex.rounds_us([(fns[k], sets) for k in keys], rounds if gpu else 1)))
            med = {k: statistics.median(t) for k, t in times.items()}
            for (name, w), t in med.items():
                writer.writerow(dict(B=1, N=N, lengths="given" if w else "none", config=name, num_splits=splits,
                                     gpu_us=f"{t:.4g}", round_us=" ".join(f"{u:.4g}" for u in times[(name, w)]),
                                     vs_gpu_config=f"{t / med[('gpu_config', w)]:.4f}", **ex.environment()))
            f.flush()
            print(f"N={N}: " + ", ".join(f"{n}/{'len' if w else 'full'} {t:.2f}" for (n, w), t in med.items()),
                  flush=True)
            del sets, x, fns


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
