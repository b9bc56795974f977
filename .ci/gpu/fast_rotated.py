"""Experiment behind book/results/rotated_loop_bm256_try.csv (run by explore3.py): fa2.chapters.fast's kernel with one
extra flag, ROTATE, that issues the next tile's Q K^T before this tile's softmax. Not part of the package."""
import math

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from fa2 import runtime
from fa2.chapters.fast import DEFAULT_CONFIG, LOG2E, _tile, attend_tiles_fast  # importing fa2.chapters.fast sets the TMA allocator


@triton.jit
def _softmax_pv(acc, row_max, row_sum, scores, desc_v, off_b, off_kv_h, kv_tile_start, qk_scale,
                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, HOST_DESC: tl.constexpr):
    m_new = tl.maximum(row_max, tl.max(scores, axis=1) * qk_scale)
    p = tl.math.exp2(scores * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(row_max - m_new)
    row_sum = row_sum * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    v = _tile(desc_v, off_b, off_kv_h, kv_tile_start, BLOCK_N, HEAD_DIM, HOST_DESC)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, m_new, row_sum


@triton.jit
def attend_tiles_rotated(acc, row_max, row_sum, q, desc_k, desc_v, off_b, off_kv_h, kv_start, kv_end, qk_scale,
                         BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, HOST_DESC: tl.constexpr):
    if kv_end > kv_start:
        k = _tile(desc_k, off_b, off_kv_h, kv_start, BLOCK_N, HEAD_DIM, HOST_DESC)
        scores = tl.dot(q, k.T)
        for kv_tile_start in tl.range(kv_start, kv_end - BLOCK_N, BLOCK_N):
            k_next = _tile(desc_k, off_b, off_kv_h, kv_tile_start + BLOCK_N, BLOCK_N, HEAD_DIM, HOST_DESC)
            scores_next = tl.dot(q, k_next.T)
            acc, row_max, row_sum = _softmax_pv(acc, row_max, row_sum, scores, desc_v, off_b, off_kv_h,
                                                kv_tile_start, qk_scale, BLOCK_N, HEAD_DIM, HOST_DESC)
            scores = scores_next
        acc, row_max, row_sum = _softmax_pv(acc, row_max, row_sum, scores, desc_v, off_b, off_kv_h,
                                            kv_end - BLOCK_N, qk_scale, BLOCK_N, HEAD_DIM, HOST_DESC)
    return acc, row_max, row_sum


@triton.jit
def _fa2_fast_kernel(
    Q, K, V, O, LSE,
    stride_qb, stride_qh, stride_qm,
    stride_kb, stride_kh, stride_kn,
    stride_vb, stride_vh, stride_vn,
    stride_ob, stride_oh, stride_om,
    H, N_Q, N_KV, qk_scale, GROUP_SIZE,
    IS_CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
    SPLIT: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, REVERSE: tl.constexpr, HOST_DESC: tl.constexpr,
    EVEN_N: tl.constexpr, ROTATE: tl.constexpr,
):
    num_m_tiles = tl.num_programs(0)
    pid_m = tl.program_id(0)
    if REVERSE:
        pid_m = num_m_tiles - 1 - pid_m              # causal: the longest query tiles start first
    pid_bh = tl.program_id(1)
    off_b = pid_bh // H
    off_h = pid_bh % H
    off_kv_h = off_h // GROUP_SIZE
    if HOST_DESC:
        desc_q, desc_k, desc_v, desc_o = Q, K, V, O      # 4-D descriptors made on the host
    else:
        # TMA descriptors of this (batch, head): 2-D (rows, HEAD_DIM) views, rows past the end read as zeros
        b64, h64, kvh64 = off_b.to(tl.int64), off_h.to(tl.int64), off_kv_h.to(tl.int64)
        desc_q = tl.make_tensor_descriptor(Q + b64 * stride_qb + h64 * stride_qh, shape=[N_Q, HEAD_DIM],
                                           strides=[stride_qm, 1], block_shape=[BLOCK_M, HEAD_DIM])
        desc_k = tl.make_tensor_descriptor(K + b64 * stride_kb + kvh64 * stride_kh, shape=[N_KV, HEAD_DIM],
                                           strides=[stride_kn, 1], block_shape=[BLOCK_N, HEAD_DIM])
        desc_v = tl.make_tensor_descriptor(V + b64 * stride_vb + kvh64 * stride_vh, shape=[N_KV, HEAD_DIM],
                                           strides=[stride_vn, 1], block_shape=[BLOCK_N, HEAD_DIM])
        desc_o = tl.make_tensor_descriptor(O + b64 * stride_ob + h64 * stride_oh, shape=[N_Q, HEAD_DIM],
                                           strides=[stride_om, 1], block_shape=[BLOCK_M, HEAD_DIM])
    m_start = pid_m * BLOCK_M
    offs_m = m_start + tl.arange(0, BLOCK_M)
    q = _tile(desc_q, off_b, off_h, m_start, BLOCK_M, HEAD_DIM, HOST_DESC)   # (BLOCK_M, HEAD_DIM)
    row_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    diagonal = N_KV - N_Q
    kv_end = N_KV
    if IS_CAUSAL:
        kv_end = max(0, min(N_KV, m_start + BLOCK_M + diagonal))           # past this every key is in the future
    if SPLIT:
        # tiles [0, free_end) are visible to every row of the tile: no mask, no tail
        free_end = (N_KV // BLOCK_N) * BLOCK_N
        if IS_CAUSAL:
            free_end = min(free_end, (max(0, m_start + diagonal + 1) // BLOCK_N) * BLOCK_N)
        if ROTATE:
            acc, row_max, row_sum = attend_tiles_rotated(acc, row_max, row_sum, q, desc_k, desc_v, off_b, off_kv_h,
                                                         0, free_end, qk_scale, BLOCK_N, HEAD_DIM, HOST_DESC)
        else:
            acc, row_max, row_sum = attend_tiles_fast(
                acc, row_max, row_sum, q, desc_k, desc_v, off_b, off_kv_h, offs_m, 0, free_end, N_Q, N_KV, qk_scale,
                False, IS_CAUSAL, BLOCK_N, HEAD_DIM, HOST_DESC, False)
        acc, row_max, row_sum = attend_tiles_fast(
            acc, row_max, row_sum, q, desc_k, desc_v, off_b, off_kv_h, offs_m, free_end, max(kv_end, free_end),
            N_Q, N_KV, qk_scale, True, IS_CAUSAL, BLOCK_N, HEAD_DIM, HOST_DESC, False)
    else:
        # one loop (warp specialisation in Triton 3.6 compiles only a single loop): mask only if needed
        acc, row_max, row_sum = attend_tiles_fast(
            acc, row_max, row_sum, q, desc_k, desc_v, off_b, off_kv_h, offs_m, 0, kv_end, N_Q, N_KV, qk_scale,
            IS_CAUSAL or not EVEN_N, IS_CAUSAL, BLOCK_N, HEAD_DIM, HOST_DESC, WARP_SPECIALIZE)
    seen = row_sum > 0.0
    safe_sum = tl.where(seen, row_sum, 1.0)
    o = (acc / safe_sum[:, None]).to(desc_o.dtype)                         # (BLOCK_M, HEAD_DIM)
    if HOST_DESC:
        desc_o.store([off_b, off_h, m_start, 0], o.reshape(1, 1, BLOCK_M, HEAD_DIM))
    else:
        desc_o.store([m_start, 0], o)                                        # rows past N_Q are dropped
    # row_max is in log2 units: LSE (natural log) = row_max * ln(2) + log(row_sum)
    lse = tl.where(seen, row_max * 0.6931471805599453 + tl.log(safe_sum), float("-inf"))
    tl.store(LSE + pid_bh.to(tl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)


def attention_fast(q, k, v, causal=False, scale=None, config=None, split=None, reverse=None, host_desc=False, rotate=False):
    """Chapter 6's forward: (o, lse). Needs TMA-compatible q, k, v (see `tma_compatible`)."""
    B, H, N_Q, D = q.shape
    N_KV = k.shape[2]
    cfg = dict(DEFAULT_CONFIG, **(config or {}))
    if runtime.INTERPRET:
        cfg.update(BLOCK_M=min(cfg["BLOCK_M"], 32), BLOCK_N=min(cfg["BLOCK_N"], 32))
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"]
    split = (not cfg["WARP_SPECIALIZE"]) if split is None else split
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N_Q, device=q.device, dtype=torch.float32)
    if host_desc:
        args = [TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, blk, D])
                for t, blk in ((q, BM), (k, BN), (v, BN), (o, BM))]
    else:
        args = [q, k, v, o]
    grid = (triton.cdiv(N_Q, BM), B * H)
    _fa2_fast_kernel[grid](
        *args, lse,
        q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
        H, N_Q, N_KV, scale * LOG2E, H // k.shape[1],
        IS_CAUSAL=causal, BLOCK_M=BM, BLOCK_N=BN, HEAD_DIM=D,
        SPLIT=split, WARP_SPECIALIZE=cfg["WARP_SPECIALIZE"], REVERSE=causal if reverse is None else reverse,
        HOST_DESC=host_desc, EVEN_N=N_KV % BN == 0, ROTATE=rotate,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o, lse
