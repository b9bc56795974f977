"""128-key tiles where a split's own range is long, 64-key ones elsewhere, chosen in the kernel (an H200 probe).

    python gpu/decode_long_tiles.py OUT [ROUNDS]     # OUT/decode_long_tiles.csv, a row per (shape, variant),
                                                  # OUT/decode_long_tiles_fill.csv (the short fills)

In three runs (book/results/decode_warps.csv, decode_order.csv, decode_warp_keys.csv) chapter 9's kernel with
128-key tiles in two stages was 0.5-1.0 % faster than the shipped 64-key, three-stage launch where each split reads
32k keys or more (B = 32 with 32k and 128k keys, B = 8 with 128k), level there with cuDNN, and 0.2-3.5 % slower
at the shorter shapes. A launch chosen from the cache's capacity would pay that where a long cache holds short
rows. Here the choice is made per program from its own range, read on the device: a program whose run of tiles
holds at least LONG_MIN_KEYS keys first streams the largest multiple of 2·BLOCK_N keys of it in 2·BLOCK_N-key
tiles (a loop of its own, `tl.range(..., num_stages=2)`), then the rest in the shipped loop. Runs only (below
INTERLEAVE_MIN_SPLITS splits) and contiguous caches; otherwise the kernel is the shipped one.

Variants: "long32k" (LONG_MIN_KEYS = 32768) and "long16k", beside the shipped launch, 128/4/2 for every call, and
cuDNN, at the seven long contiguous shapes of decode_order.py and at two short fills of a long cache (128k keys
of capacity, every row 4k long: cuDNN is not timed there, it would read the whole cache); ROUNDS interleaved
rounds of CUDA-graph replays, the median kept. Every variant is checked against the fp64 reference with ragged
lengths and NaN past them first; one that fails is not timed.
"""

import csv
import dataclasses
import statistics
import sys
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

import decode_explore as ex
import decode_order as order
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant

_STEP = '''@triton.jit
def _long_tile(q, row_max, row_sum, acc, k_head, v_head, kv_tile_start, kv_lo, seqlen, pos, off_b, d_live,
               stride_k_outer, stride_k_row, stride_v_outer, stride_v_row, qk_scale, softcap_log2e, window_left,
               HAS_WINDOW: tl.constexpr, HAS_SOFTCAP: tl.constexpr, TILE: tl.constexpr):
    """One TILE-key step of the online softmax over a contiguous cache (the shipped loop's body)."""
    kv_idx = kv_tile_start + tl.arange(0, TILE)                          # (TILE,)
    load_key = (kv_idx >= kv_lo) & (kv_idx < seqlen)
    row = kv_idx.to(tl.int64)
    load_mask = load_key[:, None] & d_live[None, :]
    k = tl.load(k_head + (off_b * stride_k_outer + row * stride_k_row)[:, None], mask=load_mask, other=0.0)
    v = tl.load(v_head + (off_b * stride_v_outer + row * stride_v_row)[:, None], mask=load_mask, other=0.0)
    scores = tl.dot(q, tl.trans(k))
    if HAS_SOFTCAP:
        scores = softcap_log2e * _tanh(scores * qk_scale)
    else:
        scores = scores * qk_scale
    visible = kv_idx[None, :] <= pos[:, None]
    if HAS_WINDOW:
        visible = visible & (kv_idx[None, :] >= pos[:, None] - window_left)
    scores = tl.where(visible, scores, float("-inf"))
    m_new = tl.maximum(row_max, tl.max(scores, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.math.exp2(row_max - m_safe)
    p = tl.math.exp2(scores - m_safe[:, None])
    row_sum = row_sum * alpha + tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
    return m_new, row_sum, acc


@triton.jit
def _split_kv_kernel('''

_LOOP = "    for kv_tile_start in range(split_start, split_end, step):\n"


def _long_loop(min_keys):
    return f'''    mid = split_start                                 # where the shipped loop starts
    if PAGE_SIZE == 0 and not INTERLEAVED:
        if split_end - split_start >= {min_keys}:     # a long run: its bulk in 2·BLOCK_N-key tiles
            mid = split_start + ((split_end - split_start) // (2 * BLOCK_N)) * (2 * BLOCK_N)
            for long_start in tl.range(split_start, mid, 2 * BLOCK_N, num_stages=2):
                row_max, row_sum, acc = _long_tile(
                    q, row_max, row_sum, acc, k_head, v_head, long_start, kv_lo, seqlen, pos, off_b,
                    d_live, stride_k_outer, stride_k_row, stride_v_outer, stride_v_row, qk_scale,
                    softcap_log2e, window_left, HAS_WINDOW, HAS_SOFTCAP, 2 * BLOCK_N)
    for kv_tile_start in range(mid, split_end, step):
'''


def long_tiles(min_keys):
    return mutant(flash_decoding, {"@triton.jit\ndef _split_kv_kernel(": _STEP, _LOOP: _long_loop(min_keys)})


LONG = {"long32k": long_tiles(32768), "long16k": long_tiles(16384)} if runtime.DEVICE == "cuda" else {}
FILLS = [(8, 131072, 4096), (32, 131072, 4096)]        # (B, capacity, every row's length)


def variants(gpu):
    """{name: (module, config or None for the shipped one)}."""
    if not gpu:   # the CPU: 16-key tiles, long runs from 32 keys, so the smoke shapes take both loops
        return {"shipped": (flash_decoding, None), "long32": (long_tiles(32), None)}
    return {"shipped": (flash_decoding, None), "n128w4s2": (flash_decoding, order.N128),
            **{name: (module, None) for name, module in LONG.items()}}


def short_fills(out, rounds, context):
    """Rows of 4k keys in caches of 128k: each variant's time (no check: the same kernels as above)."""
    with open(out / "decode_long_tiles_fill.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["fill"] + order.COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for B, capacity, fill in FILLS:
            shape = bd.DecodeShape(B, capacity)
            sets = [dataclasses.replace(x, cache_seqlens=torch.full_like(x.cache_seqlens, fill)) for x in
                    bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))]
            table = variants(True)
            fns = {n: ex.plan_fn(m, sets[0], cfg, None) for n, (m, cfg) in table.items()}
            names = list(fns)
            times = dict(zip(names, ex.rounds_us([(fns[n], sets) for n in names], rounds)))
            med = {n: statistics.median(t) for n, t in times.items()}
            for n in names:
                writer.writerow(dict(B=B, N=capacity, variant=n, fill=fill, **(table[n][1] or {}),
                                     **ex.timed_columns(n, {}, times, med, "shipped"), **context))
            print(f"B={B} capacity={capacity} fill={fill}: " + " | ".join(f"{n} {med[n]:.2f}" for n in names),
                  flush=True)
            del sets, fns
            torch.cuda.empty_cache()


if __name__ == "__main__":
    out, rounds = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5
    order.measure(out, "decode_long_tiles.csv", variants, set(), rounds)
    if runtime.DEVICE == "cuda":
        short_fills(out, rounds, ex.environment())
