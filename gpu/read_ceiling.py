"""How fast can any kernel of ours read a decode cache? The read-only ceiling beside fa2.decode and cuDNN (an H200).

    python gpu/read_ceiling.py OUT [ROUNDS]     # OUT/read_ceiling.csv, a row per (shape, reader)

At B = 8 and 32 with 4k keys or more SDPA's cuDNN backend runs 0.3-1.1 % faster than fa2.decode, both at about
95 % of HBM peak (book/results/decode.csv). A decode kernel with its softmax removed only drew level with cuDNN
(book/results/decode_order.md). This probe asks what the bytes themselves allow: kernels that only read K and V
(summing them, so that nothing is optimised away and every reader can be checked) in several orders, timed in
interleaved rounds of CUDA-graph replays beside the shipped fa2.decode and cuDNN on the same caches:
- "rows": one program per (batch row, KV head), reading its row's K and V tile by tile, as chapter 9's kernel at
  one split does (BLOCK_N keys a tile, the launch's warps and stages);
- "flat": a grid of P programs over the caches viewed as one array, program p reading chunks p, p + P, p + 2P, ...
  of CHUNK elements of K and of V: at any moment the P programs read neighbouring addresses;
- "runs": P programs, each reading one contiguous run of 1/P of K and of V;
- "torch_sum": torch.sum over K and over V (PyTorch's reduction kernels).
Every reader's sum is compared with an fp64 sum of the same caches before it is timed (error over the
square root of the sum of squares: a reader that skipped 1 % of the cache would be off by about 0.1).
"""

import csv
import os
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend

import decode_explore as ex                         # environment, rounds_us
import fa2
from fa2 import bench_decode as bd
from fa2 import runtime

SHAPES = [(32, 4096), (32, 8192), (8, 32768), (32, 131072), (8, 131072), (1, 131072)]
FIRST = int(os.environ.get("READ_FIRST", "0"))         # skip the first FIRST shapes (a second call)
SMOKE = [bd.DecodeShape(2, 256, Hq=4, Hkv=2, D=32), bd.DecodeShape(1, 512, Hq=8, Hkv=2, D=32)]
TOLERANCE = 1e-2       # a reader whose sum is further off (in units of the sum's spread) fails its check
COLUMNS = ["B", "N", "reader", "block", "programs", "num_warps", "num_stages", "gpu_us", "round_us", "gbs",
           "vs_cudnn", "rel_err", "check", "device", "torch", "triton", "command"]


@triton.jit
def _rows_read(k_ptr, v_ptr, out_ptr, N, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)                                            # one (batch row, KV head)
    base = row.to(tl.int64) * N * HEAD_DIM
    offs = tl.arange(0, BLOCK_N)[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]   # (BLOCK_N, HEAD_DIM)
    acc = tl.zeros([BLOCK_N, HEAD_DIM], tl.float32)
    for start in range(0, N, BLOCK_N):
        at = base + start * HEAD_DIM + offs
        acc += tl.load(k_ptr + at).to(tl.float32) + tl.load(v_ptr + at).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc))


@triton.jit
def _flat_read(k_ptr, v_ptr, out_ptr, n_chunks, CHUNK: tl.constexpr, RUNS: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    offs = tl.arange(0, CHUNK)                                        # (CHUNK,)
    acc = tl.zeros([CHUNK], tl.float32)
    if RUNS:                                                          # one contiguous run per program
        first = (pid * n_chunks) // programs
        last = ((pid + 1) * n_chunks) // programs
        step = 1
    else:                                                             # chunks pid, pid + P, ...: neighbours in step
        first = pid
        last = n_chunks
        step = programs
    for chunk in range(first, last, step):
        at = tl.cast(chunk, tl.int64) * CHUNK + offs                   # int64: K alone passes 2**31 elements
        acc += tl.load(k_ptr + at).to(tl.float32) + tl.load(v_ptr + at).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


def rows_reader(block_n, num_warps, num_stages):
    def read(x):
        B, H, N, D = x.k_cache.shape
        out = torch.empty(B * H, device=x.k_cache.device, dtype=torch.float32)
        _rows_read[(B * H,)](x.k_cache, x.v_cache, out, N, HEAD_DIM=D, BLOCK_N=block_n,
                             num_warps=num_warps, num_stages=num_stages)
        return out.sum()
    return read


def flat_reader(chunk, programs, num_warps, num_stages, runs):
    def read(x):
        n = x.k_cache.numel()
        assert n % chunk == 0, "the probe's shapes fill whole chunks"
        out = torch.empty(programs, device=x.k_cache.device, dtype=torch.float32)
        _flat_read[(programs,)](x.k_cache, x.v_cache, out, n // chunk, CHUNK=chunk, RUNS=runs,
                                num_warps=num_warps, num_stages=num_stages)
        return out.sum()
    return read


def torch_sum(x):
    return x.k_cache.sum(dtype=torch.float32) + x.v_cache.sum(dtype=torch.float32)


def fp64_sums(x, piece=1 << 26):
    """(sum, spread) of K and V in fp64, a piece at a time (a whole fp64 copy of a 128k-key cache is 34 GB). The
    spread, the square root of the sum of squares, is how far a sum of random values strays: a reader that skipped
    a fraction f of the cache would be off by about sqrt(f) of it."""
    total = torch.zeros((), dtype=torch.float64, device=x.k_cache.device)
    squares = torch.zeros_like(total)
    for cache in (x.k_cache, x.v_cache):
        for part in cache.reshape(-1).split(piece):
            part = part.double()
            total += part.sum()
            squares += part.square().sum()
    return total, squares.sqrt()


def readers(gpu, sms):
    """{name: (fn, columns)}: every read-only kernel of the probe."""
    out = {"torch_sum": (torch_sum, {})}
    rows = [(64, 4, 1), (64, 4, 3), (128, 4, 1), (128, 4, 2), (128, 8, 2)] if gpu else [(16, 4, 1), (32, 4, 2)]
    for bn, w, s in rows:
        out[f"rows_n{bn}w{w}s{s}"] = (rows_reader(bn, w, s), dict(block=bn, num_warps=w, num_stages=s))
    flat = ([(4096, 2, 4, 1), (4096, 4, 4, 1), (4096, 8, 4, 1), (8192, 2, 4, 1), (8192, 4, 4, 1),
             (8192, 4, 8, 1), (8192, 2, 4, 3), (16384, 2, 8, 1)] if gpu else [(1024, 2, 4, 1), (512, 3, 4, 2)])
    for chunk, per_sm, w, s in flat:
        programs = per_sm * sms
        for runs in (False, True):
            name = f"{'runs' if runs else 'flat'}_c{chunk}p{programs}w{w}s{s}"
            out[name] = (flat_reader(chunk, programs, w, s, runs),
                         dict(block=chunk, programs=programs, num_warps=w, num_stages=s))
    return out


def main(out, rounds=5):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    sms = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 2
    shapes = [bd.DecodeShape(B, N) for B, N in SHAPES[FIRST:]] if gpu else SMOKE
    context = ex.environment()
    with open(out / "read_ceiling.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        for shape in shapes:
            sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
            table = readers(gpu, sms)
            x = sets[0]
            want, scale = fp64_sums(x)
            errors = {}
            for name, (fn, _) in table.items():
                got = fn(x).double()
                errors[name] = float((got - want).abs() / scale)
            timed = {n: fn for n, (fn, _) in table.items() if errors[n] <= TOLERANCE}
            if gpu:
                timed["fa2_decode"] = lambda x: fa2.decode(x.q, x.k_cache, x.v_cache, cache_seqlens=x.cache_seqlens)
                timed["cudnn"] = bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, sets)
            names = list(timed)
            times = dict(zip(names, ex.rounds_us([(timed[n], sets) for n in names], rounds if gpu else 1)))
            med = {n: statistics.median(t) for n, t in times.items()}
            kv_bytes = shape.kv_bytes()
            for name in names + [n for n in table if n not in timed]:
                cols = table[name][1] if name in table else {}
                row = dict(B=shape.B, N=shape.N, reader=name, **cols, rel_err=errors.get(name, ""),
                           check=("ok" if errors.get(name, 0) <= TOLERANCE else "FAIL") if name in table else "",
                           **context)
                if name in med:
                    row.update(gpu_us=f"{med[name]:.4g}", round_us=" ".join(f"{t:.4g}" for t in times[name]),
                               gbs=f"{kv_bytes / med[name] / 1e3:.1f}")
                    if "cudnn" in med:
                        row["vs_cudnn"] = f"{med['cudnn'] / med[name]:.4f}"
                writer.writerow(row)
            f.flush()
            best = sorted(med.items(), key=lambda item: item[1])
            print(f"B={shape.B} N={shape.N} ({kv_bytes / 1e9:.3f} GB): "
                  + " | ".join(f"{n} {t:.4g} ({kv_bytes / t / 1e3:.0f} GB/s)" for n, t in best[:8])
                  + (f" || fa2 {med['fa2_decode']:.4g} cudnn {med['cudnn']:.4g}" if gpu else "")
                  + "".join(f" FAIL {n} {e:.1e}" for n, e in errors.items() if e > TOLERANCE), flush=True)
            del sets, x, timed
            if gpu:
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
