"""Each warp its own keys and its own online softmax, merged once per program (an H200 probe).

    python gpu/decode_warp_keys.py OUT [ROUNDS]     # OUT/decode_warp_keys.csv, a row per (shape, variant)

Chapter 9's split-KV kernel lays its four warps side by side along a tile's keys for QK^T and along the head
dim for PV, so every tile's row maximum and row sum cross the warps through shared memory, and P is re-laid out
through it for the second product (14 bar.sync a tile, book/results/decode_warps.md). cuDNN's decode kernel
(`..._16x128x128_1x4x1`, book/results/decode_cudnn_ncu.csv) is read here as 16 query rows, 128-key tiles and four
warps along the keys for both products: each warp would then keep its own row max, row sum and O over its 32 keys
of every tile, and the warps' partial softmaxes are merged once, at the end. book/results/decode_order.md found
that even dropping the softmax leaves fa2 level with cuDNN, so the question is whether this layout streams faster.

Written in Triton as a batched (3-D) product: a tile of BLOCK_N keys is read as (WARPS, BLOCK_N / WARPS, D) and
Triton puts the warps of a batched mma on the batch axis, so the row reductions stay inside a warp and P feeds the
second product from registers. Variants (mutants of chapter 9's module, contiguous caches only):
- "wk4_n128s2", "wk4_n64s3", "wk4_n64s4": four warps, 128-key tiles in 2 stages or 64-key ones in 3 or 4
  (compiled for sm_90: 194-255 registers, 64-96 KB of shared memory, two programs an SM; 128-key tiles in 3
  stages would take 128 KB and one program an SM);
- "wk8_n128s2": eight warps of 16 keys each;
beside the shipped launch, its 128/4/2 and cuDNN, ROUNDS interleaved rounds of CUDA-graph replays, the median
kept. Every variant is checked against the fp64 reference with ragged lengths and NaN past them before it is
timed; one that fails is not timed.
"""

import sys

import decode_order as order                       # SHAPES, SMOKE, measure
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant

_LOOP_START = '    row_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)   # base-2 units\n'
_LOOP_END = "        row_max = m_new\n"


def _loop_text():
    source = flash_decoding.__loader__.get_source(flash_decoding.__name__)
    start = source.index(_LOOP_START)
    return source[start:source.index(_LOOP_END, start) + len(_LOOP_END)]


def _warp_keys_loop(warps):
    return f'''    WK: tl.constexpr = {warps}                        # warps, each with its own keys of a tile
    SUB: tl.constexpr = BLOCK_N // WK                 # keys a warp takes from each tile
    tl.static_assert(PAGE_SIZE == 0)                  # this probe: contiguous caches only
    row_max = tl.full([WK, BLOCK_M], float("-inf"), dtype=tl.float32)   # per warp, base 2
    row_sum = tl.zeros([WK, BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([WK, BLOCK_M, HEAD_DIM], dtype=tl.float32)           # per warp
    offs_n = tl.arange(0, WK)[:, None] * SUB + tl.arange(0, SUB)[None, :]   # (WK, SUB)
    q3 = tl.broadcast_to(q[None, :, :], (WK, BLOCK_M, HEAD_DIM))
    k_base = K + off_b * stride_k_outer + off_kv_h * stride_kh + offs_d[None, None, :] * stride_kd
    v_base = V + off_b * stride_v_outer + off_kv_h * stride_vh + offs_d[None, None, :] * stride_vd
    for kv_tile_start in range(split_start, split_end, step):
        kv_idx = kv_tile_start + offs_n                                # (WK, SUB)
        load_key = (kv_idx >= kv_lo) & (kv_idx < seqlen)
        rows = kv_idx.to(tl.int64)[:, :, None]
        load_mask = load_key[:, :, None] & d_live[None, None, :]
        k = tl.load(k_base + rows * stride_k_row, mask=load_mask, other=0.0)  # (WK, SUB, HEAD_DIM)
        v = tl.load(v_base + rows * stride_v_row, mask=load_mask, other=0.0)
        scores = tl.dot(q3, tl.permute(k, (0, 2, 1)))       # (WK, BLOCK_M, SUB) fp32
        if HAS_SOFTCAP:
            scores = softcap_log2e * _tanh(scores * qk_scale)
        else:
            scores = scores * qk_scale
        visible = kv_idx[:, None, :] <= pos[None, :, None]
        if HAS_WINDOW:
            visible = visible & (kv_idx[:, None, :] >= pos[None, :, None] - window_left)
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(row_max, tl.max(scores, axis=2))          # (WK, BLOCK_M)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.math.exp2(row_max - m_safe)
        p = tl.math.exp2(scores - m_safe[:, :, None])
        row_sum = row_sum * alpha + tl.sum(p, axis=2)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, :, None])    # (WK, BLOCK_M, HEAD_DIM)
        row_max = m_new
    # the warps' partial softmaxes, merged once: weights 2^(m_w - m), 0 for a warp that saw no key
    m_all = tl.max(row_max, axis=0)                                  # (BLOCK_M,)
    weight = tl.math.exp2(row_max - tl.where(m_all == float("-inf"), 0.0, m_all)[None, :])
    row_sum = tl.sum(row_sum * weight, axis=0)
    acc = tl.sum(acc * weight[:, :, None], axis=0)                   # (BLOCK_M, HEAD_DIM)
    row_max = m_all
'''


WARP_KEYS = {w: mutant(flash_decoding, {_loop_text(): _warp_keys_loop(w)}) for w in (4, 8)}


def variants(gpu):
    """{name: (module, config or None for the shipped one)}."""
    if not gpu:
        return {"shipped": (flash_decoding, None),
                "wk4_n64s1": (WARP_KEYS[4], dict(block_n=64, num_warps=4, num_stages=1)),
                "wk8_n128s1": (WARP_KEYS[8], dict(block_n=128, num_warps=8, num_stages=1))}
    return {"shipped": (flash_decoding, None), "n128w4s2": (flash_decoding, order.N128),
            "wk4_n128s2": (WARP_KEYS[4], dict(block_n=128, num_warps=4, num_stages=2)),
            "wk4_n64s3": (WARP_KEYS[4], dict(block_n=64, num_warps=4, num_stages=3)),
            "wk4_n64s4": (WARP_KEYS[4], dict(block_n=64, num_warps=4, num_stages=4)),
            "wk8_n128s2": (WARP_KEYS[8], dict(block_n=128, num_warps=8, num_stages=2))}


if __name__ == "__main__":
    order.measure(sys.argv[1], "decode_warp_keys.csv", variants, set(), *(int(a) for a in sys.argv[2:3]))
