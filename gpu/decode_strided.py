"""Ways of assigning key tiles to the splits of chapter 9's split-KV kernel, timed side by side (an H200).

    python gpu/decode_strided.py OUT [SECONDS] [VARIANT,...]   # OUT/decode_strided.csv; on the CPU: a check only

A paged decode's first K load waited for three dependent reads: the row's length (which fixed where the split's
chunk started), then the block-table entries of that chunk's first tile, then K. With 1k keys each split holds
one or two tiles, so that chain is most of the call.
- "chunked": split s takes one run of consecutive tiles (chapter 9's assignment when the committed CSV was made,
  where these rows are called "shipped"), a mutant of fa2/chapters/flash_decoding.py;
- "strided": split s takes tiles s, s + S, s + 2S, ..., so where its first tile is does not depend on the length
  (only where the loop stops does): chapter 9's kernel as it is now, chosen from this script's run;
- "prefetch": strided, and each tile's block-table entries are loaded one tile ahead (the first tile's before
  the loop, masked by the table's size, not by the length), so the table read can overlap the length read; a
  mutant. It helped at 1k keys and hurt from 8k on (the pipeliner no longer prefetches K and V).
- "first" (timed by next_window.sh: book/results/decode_first_try.csv; run with VARIANT strided,first): strided, with each split's first tile peeled
  out of the loop and its loads masked by the capacity instead of the length, so they need not wait for it --
  at 1k keys most splits have one tile, and the length's load is then a whole round trip before any K arrives.
Every variant is checked against the fp64 reference with ragged lengths and NaN written past them before it is
timed.
"""

import csv
import sys
import time
from pathlib import Path

import torch

import fa2.decoding as decoding
from fa2 import bench_decode as bd
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant, rel_err

from decode_explore import environment, plan_fn, shape_inputs   # gpu/decode_explore.py: this script's folder is on sys.path

# How split s finds its tiles is a launch option now (decode_launch's `interleave`, by default from
# INTERLEAVE_MIN_SPLITS splits on): these two mutants fix it either way for every split count.
_RULE = f"INTERLEAVE_MIN_SPLITS = {flash_decoding.INTERLEAVE_MIN_SPLITS} "
CHUNKED = {_RULE: "INTERLEAVE_MIN_SPLITS = 10 ** 9 "}   # one run of consecutive tiles
STRIDED = {_RULE: "INTERLEAVE_MIN_SPLITS = 1 "}         # tiles s, s + S, s + 2S, ...
PREFETCH = {
    "    offs_n = tl.arange(0, BLOCK_N)\n": """    offs_n = tl.arange(0, BLOCK_N)
    pages = tl.zeros([BLOCK_N], dtype=tl.int64)
    if PAGE_SIZE > 0:
        idx0 = split_start + offs_n
        pages = tl.load(BLOCK_TABLE + table_row + (idx0 // PAGE_SIZE) * stride_table_p,
                        mask=idx0 < N_CAP, other=0).to(tl.int64)
""",
    """        k_rows, v_rows = _cache_rows(BLOCK_TABLE, table_row, stride_table_p, kv_tile_start,
                                     kv_idx, seqlen, off_b, stride_k_outer, stride_k_row,
                                     stride_v_outer, stride_v_row, PAGE_SIZE, BLOCK_N)""":
    """        if PAGE_SIZE > 0:
            next_idx = kv_idx + step
            next_pages = tl.load(BLOCK_TABLE + table_row + (next_idx // PAGE_SIZE) * stride_table_p,
                                 mask=next_idx < N_CAP, other=0).to(tl.int64)
            in_page = (kv_idx % PAGE_SIZE).to(tl.int64)
            k_rows = pages * stride_k_outer + in_page * stride_k_row
            v_rows = pages * stride_v_outer + in_page * stride_v_row
            pages = next_pages
        else:
            k_rows, v_rows = _cache_rows(BLOCK_TABLE, table_row, stride_table_p, kv_tile_start,
                                         kv_idx, seqlen, off_b, stride_k_outer, stride_k_row,
                                         stride_v_outer, stride_v_row, PAGE_SIZE, BLOCK_N)""",
}
FIRST_TILE = {       # the first tile of each split peeled, its loads masked by the capacity, not the length
    "    offs_n = tl.arange(0, BLOCK_N)\n    for kv_tile_start in range(split_start, split_end, step):":
    """    offs_n = tl.arange(0, BLOCK_N)
    # the first tile, peeled: its loads are masked by the capacity, not by the length, so they need not wait for
    # it (the block table's entries up to the capacity must be valid pages: no bounds check in this mutant);
    # keys past the length are masked out of the scores, and V's rows there are zeroed (NaN · 0 is NaN)
    kv_idx = split_start + offs_n
    in_cap = (kv_idx >= kv_lo) & (kv_idx < N_CAP)
    first = tl.where(split_start < N_CAP, split_start, 0)   # a table entry inside the row
    k_rows, v_rows = _cache_rows(BLOCK_TABLE, table_row, stride_table_p, first,
                                 kv_idx, N_CAP, off_b, stride_k_outer, stride_k_row,
                                 stride_v_outer, stride_v_row, PAGE_SIZE, BLOCK_N)
    cap_mask = in_cap[:, None] & d_live[None, :]
    k = tl.load(k_head + k_rows[:, None], mask=cap_mask, other=0.0)
    v = tl.load(v_head + v_rows[:, None], mask=cap_mask, other=0.0)
    v = tl.where(((kv_idx >= kv_lo) & (kv_idx < seqlen))[:, None], v, 0.0)
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
    p = tl.math.exp2(scores - m_safe[:, None])
    row_sum = tl.sum(p, axis=1)
    acc = tl.dot(p.to(v.dtype), v)
    row_max = m_new
    for kv_tile_start in range(split_start + step, split_end, step):""",
}
# the committed decode_strided.csv was made when "chunked" was the shipped kernel: its rows say "shipped" there
VARIANTS = {"chunked": mutant(flash_decoding, CHUNKED), "strided": mutant(flash_decoding, STRIDED),
            "prefetch": mutant(flash_decoding, dict(STRIDED, **PREFETCH)),
            "first": mutant(flash_decoding, dict(STRIDED, **FIRST_TILE))}
GPU_SHAPES = [(1, 1024, 0), (1, 1024, 16), (1, 1024, 256), (8, 1024, 0), (8, 1024, 16), (8, 1024, 256),
              (1, 8192, 0), (1, 8192, 16), (1, 131072, 0), (1, 131072, 16), (32, 8192, 16)]
CPU_SHAPES = [bd.DecodeShape(2, 100, 16, Hq=4, Hkv=2, D=32), bd.DecodeShape(2, 90, 0, Hq=4, Hkv=2, D=32),
              bd.DecodeShape(3, 64, 32, Hq=8, Hkv=2, D=16, N_Q=3)]
COLUMNS = ["B", "N", "layout", "variant", "block_n", "num_stages", "num_splits", "pdl", "gpu_us", "vs_shipped",
           "rel_err", "rel_err_ragged", "device", "torch", "triton", "command"]


def configs(paged):
    if runtime.DEVICE != "cuda":
        return [dict(block_n=16, num_warps=4, num_stages=1)]
    return [dict(block_n=bn, num_warps=4, num_stages=s) for bn in (32, 64) for s in ((5, 6) if paged else (3,))]


def ragged_check(shape, fn, seed):
    """Error against fp64 with random lengths in [1, N] and NaN past them (fresh inputs: the poison stays)."""
    generator = torch.Generator(runtime.DEVICE).manual_seed(seed)
    x = bd.make_inputs(shape, generator)
    lengths = torch.randint(1, shape.N + 1, (shape.B,), device=runtime.DEVICE, generator=generator)
    lengths = lengths.to(torch.int32)
    for cache in (x.k_cache, x.v_cache):
        bd.poison_past(cache, x.block_table, lengths)
    ragged = bd.DecodeInputs(x.q, x.k_cache, x.v_cache, x.block_table, lengths)
    return rel_err(fn(ragged), bd.reference(x, lengths))


def main(out, seconds=240.0, names=("chunked", "strided", "prefetch")):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    on_gpu = runtime.DEVICE == "cuda"
    shapes = [bd.DecodeShape(B, N, p) for B, N, p in GPU_SHAPES] if on_gpu else CPU_SHAPES
    worst = 0.0
    with open(out / "decode_strided.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        context = environment()
        writer.writeheader()
        for shape, sets in shape_inputs(shapes, seconds):
            x = sets[0]
            ref = bd.reference(x)
            paged = shape.page_size > 0
            shipped_splits = decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
            splits_list = sorted({shipped_splits, max(1, shipped_splits // 2), 3, 5} if not on_gpu
                                 else {shipped_splits, max(1, shipped_splits // 2)})
            base_us = None
            for variant in names:
                for cfg in configs(paged):
                    for splits in splits_list:
                        for pdl in (("auto",) if not on_gpu else (True, False)):
                            fn = plan_fn(VARIANTS[variant], x, dict(cfg, pdl=pdl), splits)
                            err = rel_err(fn(x), ref)
                            err_ragged = ragged_check(shape, fn, splits)
                            worst = max(worst, err, err_ragged, 0.0 if err == err else 1.0)
                            us = bd.gpu_time_us(fn, sets)[0] if on_gpu else float("nan")
                            base_us = base_us or us
                            writer.writerow(dict(B=shape.B, N=shape.N, layout=shape.layout, variant=variant,
                                                 block_n=cfg["block_n"], num_stages=cfg["num_stages"],
                                                 num_splits=splits, pdl=pdl, gpu_us=f"{us:.4g}",
                                                 vs_shipped=f"{us / base_us:.4f}", rel_err=f"{err:.1e}",
                                                 rel_err_ragged=f"{err_ragged:.1e}", **context))
                            f.flush()
            print(f"{shape.name():24s} done [{time.perf_counter() - start:5.0f} s]", flush=True)
            del sets, x
    print(f"worst error against fp64 (ragged, NaN past the lengths included): {worst:.2e}")
    return worst


if __name__ == "__main__":
    names = tuple(sys.argv[3].split(",")) if len(sys.argv) > 3 else ("chunked", "strided", "prefetch")
    sys.exit(0 if main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 240.0, names) <= 2e-2 else 1)
