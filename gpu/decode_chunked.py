"""Split-KV tile assignment at long caches, beside SDPA's cuDNN backend (an H200).

    python gpu/decode_chunked.py OUT [ROUNDS]     # OUT/decode_chunked.csv, a row per (shape, variant)

Under Nsight Compute (gpu/decode_cudnn_ncu.py, book/results/decode_cudnn_ncu.csv) cuDNN's decode at B = 8 with 32k
keys has the same structure as fa2.decode's (256 programs of 128 threads, then a reduction kernel) and reads the
same DRAM bytes, at 93.8 % of peak DRAM throughput against fa2's 91.6 %. fa2's splits take interleaved tiles
(s, s + S, ...: chosen at 1k-8k keys, gpu/decode_strided.py); cuDNN's presumably take runs of consecutive keys.
Variants: "interleaved" (what chapter 9 shipped when this ran) and "chunked" (split s takes one run of consecutive
tiles), gpu/decode_strided.py's mutants that fix the assignment for every split count; each also with 128-key tiles
and two stages. Chapter 9 now interleaves from INTERLEAVE_MIN_SPLITS splits on and takes runs below (§9.5). Every variant is checked against the fp64 reference with
ragged lengths and NaN past them (fa2.bench_decode.ragged_error), then all of them and cuDNN are timed in ROUNDS
interleaved rounds (order rotated each round; CUDA-graph replays), the median kept.
"""

import csv
import sys
from pathlib import Path

import torch

import decode_explore as ex                         # plan_fn, environment
from decode_strided import CHUNKED, STRIDED
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant

CHUNKED_MODULE, STRIDED_MODULE = mutant(flash_decoding, CHUNKED), mutant(flash_decoding, STRIDED)
SHAPES = [(8, 4096), (8, 32768), (8, 131072), (1, 32768), (1, 131072), (32, 8192)]
SMOKE = [(2, 200)]
COLUMNS = ["B", "N", "variant", "block_n", "num_stages", "num_splits", "gpu_us", "round_us", "vs_interleaved",
           "vs_cudnn", "rel_err_ragged", "check", "device", "torch", "triton", "command"]


def main(out, rounds=3):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    kw = {} if gpu else dict(Hq=4, Hkv=2, D=32)
    variants = [("interleaved", STRIDED_MODULE, None), ("chunked", CHUNKED_MODULE, None)]
    if gpu:
        variants += [("interleaved_n128s2", STRIDED_MODULE, dict(block_n=128, num_stages=2)),
                     ("chunked_n128s2", CHUNKED_MODULE, dict(block_n=128, num_stages=2))]
    with open(out / "decode_chunked.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        context = ex.environment()
        for B, N in (SHAPES if gpu else SMOKE):
            shape = bd.DecodeShape(B, N, **kw)
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            x = sets[0]
            splits = ex.decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
            fns = {name: ex.plan_fn(module, x, cfg, None) for name, module, cfg in variants}
            errors, times, med = ex.checked_medians(shape, sets, fns, rounds)
            line = f"B={B} N={N} splits={splits}:"
            for name, module, cfg in variants + ([("cudnn", None, None)] if gpu else []):
                writer.writerow(dict(
                    B=B, N=N, variant=name, num_splits=splits if name != "cudnn" else "",
                    block_n=(cfg or {}).get("block_n", ""), num_stages=(cfg or {}).get("num_stages", ""),
                    **ex.timed_columns(name, errors, times, med, "interleaved"), **context))
                line += ex.summary(name, errors, med)
            f.flush()
            print(line, flush=True)
            del sets, x, fns
            if gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
