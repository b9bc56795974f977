"""Chapter 9: Flash-Decoding -- split-KV attention over a (paged, ragged) KV cache and the LSE combine."""
import math

import torch
import triton
import triton.language as tl

from fa2 import runtime

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
LN2 = 0.6931471805599453    # ln(2): a base-2 log times ln(2) is a natural log


@triton.jit
def _tanh(x):
    """tanh from exp2 (the interpreter and every Triton version have exp2): 1 - 2 / (e^{2x} + 1)."""
    return 1.0 - 2.0 / (tl.math.exp2(x * 2.8853900817779268) + 1.0)   # 2.885... = 2·log2(e)


@triton.jit
def _cache_rows(BLOCK_TABLE, table_row, stride_table_p, kv_idx, off_b, stride_k_outer, stride_k_row,
                stride_v_outer, stride_v_row, load_key, PAGE_SIZE: tl.constexpr):
    """Offsets of the cache rows holding keys kv_idx (BLOCK_N,): contiguous (outer = batch) or paged."""
    if PAGE_SIZE > 0:   # paged: key j lives in row j % PAGE_SIZE of page block_table[b, j // PAGE_SIZE]
        page = tl.load(BLOCK_TABLE + table_row + (kv_idx // PAGE_SIZE) * stride_table_p, mask=load_key, other=0)
        page = page.to(tl.int64)
        row = (kv_idx % PAGE_SIZE).to(tl.int64)
        return page * stride_k_outer + row * stride_k_row, page * stride_v_outer + row * stride_v_row
    else:               # contiguous: key j is row j of batch b
        row = kv_idx.to(tl.int64)
        return off_b * stride_k_outer + row * stride_k_row, off_b * stride_v_outer + row * stride_v_row


@triton.jit
def _split_kv_kernel(
    Q, K, V, SEQLENS, BLOCK_TABLE, O, LSE,
    stride_qb, stride_qh, stride_qm, stride_qd,
    stride_k_outer, stride_kh, stride_k_row, stride_kd,   # outer = batch (contiguous) or page (paged)
    stride_v_outer, stride_vh, stride_v_row, stride_vd,
    stride_ob, stride_oh, stride_om, stride_od,
    stride_table_b, stride_table_p,
    H_KV, N_Q, N_CAP, GROUP_SIZE, num_splits, qk_scale, softcap_log2e, window_left,
    PAGE_SIZE: tl.constexpr, HAS_SEQLENS: tl.constexpr, HAS_WINDOW: tl.constexpr,
    HAS_SOFTCAP: tl.constexpr, SPLIT: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    pid_bkv = tl.program_id(0)                        # which (batch, KV head)
    split = tl.program_id(1)                          # which chunk of the keys
    pid_m = tl.program_id(2)                          # which tile of the packed query rows
    off_b = (pid_bkv // H_KV).to(tl.int64)
    off_kv_h = (pid_bkv % H_KV).to(tl.int64)
    # GQA packing: row r of the tile is query i = r % N_Q of head g = r // N_Q of this KV head's group
    offs_r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) packed rows
    row_live = offs_r < GROUP_SIZE * N_Q
    offs_i = offs_r % N_Q                             # query position inside the block
    off_h = off_kv_h * GROUP_SIZE + offs_r // N_Q     # (BLOCK_M,) query head
    offs_d = tl.arange(0, HEAD_DIM)
    if D == HEAD_DIM:
        d_live = tl.full([HEAD_DIM], True, tl.int1)   # every column is real: a mask along rows only
    else:
        d_live = offs_d < D                           # padded head dim: columns past D load as 0
    q_ptrs = (Q + off_b * stride_qb + off_h[:, None] * stride_qh + offs_i[:, None] * stride_qm
              + offs_d[None, :] * stride_qd)
    q = tl.load(q_ptrs, mask=row_live[:, None] & d_live[None, :], other=0.0)   # (BLOCK_M, HEAD_DIM)

    # the valid prefix of this row of the cache, read on the device: nothing on the host depends on it
    seqlen = N_CAP
    if HAS_SEQLENS:
        seqlen = tl.minimum(tl.maximum(tl.load(SEQLENS + off_b), 0), N_CAP)
    # query i sits at position pos_i = seqlen - N_Q + i and sees keys j <= pos_i (bottom-right causal)
    pos = seqlen - N_Q + offs_i                                               # (BLOCK_M,)
    kv_lo = 0                                          # first key any row of the block may see
    if HAS_WINDOW:
        kv_lo = tl.maximum(seqlen - N_Q - window_left, 0)
    kv_lo = (kv_lo // BLOCK_N) * BLOCK_N              # tiles aligned to the cache's BLOCK_N grid
    # this program's chunk: whole tiles, spread evenly over the splits
    tiles_per_split = tl.cdiv(tl.cdiv(seqlen - kv_lo, BLOCK_N), num_splits)
    split_start = kv_lo + split * tiles_per_split * BLOCK_N
    split_end = tl.minimum(split_start + tiles_per_split * BLOCK_N, seqlen)

    table_row = off_b * stride_table_b
    k_head = K + off_kv_h * stride_kh + offs_d[None, :] * stride_kd
    v_head = V + off_kv_h * stride_vh + offs_d[None, :] * stride_vd
    row_max = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)   # base-2 units
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    offs_n = tl.arange(0, BLOCK_N)
    for kv_tile_start in range(split_start, split_end, BLOCK_N):
        kv_idx = kv_tile_start + offs_n                                        # (BLOCK_N,) key positions
        load_key = (kv_idx >= kv_lo) & (kv_idx < seqlen)                      # never read past the prefix
        k_rows, v_rows = _cache_rows(BLOCK_TABLE, table_row, stride_table_p, kv_idx, off_b, stride_k_outer,
                                     stride_k_row, stride_v_outer, stride_v_row, load_key, PAGE_SIZE)
        load_mask = load_key[:, None] & d_live[None, :]
        k = tl.load(k_head + k_rows[:, None], mask=load_mask, other=0.0)      # (BLOCK_N, HEAD_DIM)
        v = tl.load(v_head + v_rows[:, None], mask=load_mask, other=0.0)      # (BLOCK_N, HEAD_DIM)
        scores = tl.dot(q, tl.trans(k))                                        # (BLOCK_M, BLOCK_N) fp32
        if HAS_SOFTCAP:   # softcap·tanh(s / softcap), in base-2 units
            scores = softcap_log2e * _tanh(scores * qk_scale)
        else:
            scores = scores * qk_scale
        visible = kv_idx[None, :] <= pos[:, None]                             # causal, inside the prefix
        if HAS_WINDOW:
            visible = visible & (kv_idx[None, :] >= pos[:, None] - window_left)
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(row_max, tl.max(scores, axis=1))                   # (BLOCK_M,)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)                 # no visible key yet: no NaN
        alpha = tl.math.exp2(row_max - m_safe)                                # (BLOCK_M,)
        p = tl.math.exp2(scores - m_safe[:, None])                            # (BLOCK_M, BLOCK_N) fp32
        row_sum = row_sum * alpha + tl.sum(p, axis=1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])                  # (BLOCK_M, HEAD_DIM) fp32
        row_max = m_new

    seen = row_sum > 0.0
    safe_sum = tl.where(seen, row_sum, 1.0)
    o = acc / safe_sum[:, None]                                                # (BLOCK_M, HEAD_DIM) fp32
    lse2 = tl.where(seen, row_max + tl.math.log2(safe_sum), float("-inf"))    # (BLOCK_M,) base 2
    store_mask = row_live[:, None] & d_live[None, :]
    if SPLIT:   # workspace: O (B, Hq, N_Q, num_splits, D) fp32, LSE (B, Hq, N_Q, num_splits) base 2
        part = ((off_b * GROUP_SIZE * H_KV + off_h) * N_Q + offs_i) * num_splits + split   # (BLOCK_M,)
        tl.store(O + part[:, None] * D + offs_d[None, :], o, mask=store_mask)
        tl.store(LSE + part, lse2, mask=row_live)
    else:       # one split: this program's result is the answer
        o_ptrs = (O + off_b * stride_ob + off_h[:, None] * stride_oh + offs_i[:, None] * stride_om
                  + offs_d[None, :] * stride_od)
        tl.store(o_ptrs, o.to(O.dtype.element_ty), mask=store_mask)
        lse_idx = (off_b * GROUP_SIZE * H_KV + off_h) * N_Q + offs_i                    # LSE (B, Hq, N_Q)
        tl.store(LSE + lse_idx, lse2 * 0.6931471805599453, mask=row_live)


@triton.jit
def _combine_kernel(
    O_PART, LSE_PART, O, LSE,
    stride_ob, stride_oh, stride_om, stride_od,
    H_Q, N_Q, D, num_splits,
    SPLITS: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)               # which (batch, query head, query): (b·H_Q + h)·N_Q + i
    off_b = row // (H_Q * N_Q)
    off_h = (row // N_Q) % H_Q
    off_i = row % N_Q
    offs_s = tl.arange(0, SPLITS)
    offs_d = tl.arange(0, HEAD_DIM)
    split_live = offs_s < num_splits
    lse_s = tl.load(LSE_PART + row * num_splits + offs_s, mask=split_live, other=float("-inf"))  # (SPLITS,)
    lse_max = tl.max(lse_s, axis=0)
    lse_safe = tl.where(lse_max == float("-inf"), 0.0, lse_max)        # every split empty: weights 0
    weight = tl.math.exp2(lse_s - lse_safe)                             # (SPLITS,) 0 for empty splits
    total = tl.sum(weight, axis=0)                                     # 0: the row sees no key
    safe_total = tl.where(total > 0.0, total, 1.0)
    o_s = tl.load(O_PART + (row * num_splits + offs_s)[:, None] * D + offs_d[None, :],
                  mask=split_live[:, None] & (offs_d < D)[None, :], other=0.0)  # (SPLITS, HEAD_DIM) fp32
    o = tl.sum(weight[:, None] * o_s, axis=0) / safe_total                      # (HEAD_DIM,)
    lse = tl.where(total > 0.0, (lse_safe + tl.math.log2(safe_total)) * 0.6931471805599453, float("-inf"))
    tl.store(O + off_b * stride_ob + off_h * stride_oh + off_i * stride_om + offs_d * stride_od,
             o.to(O.dtype.element_ty), mask=offs_d < D)
    tl.store(LSE + row, lse)


MAX_BLOCK_M = 64     # packed query rows per program; more rows (large groups × N_Q) take more programs


def cache_geometry(k_cache, block_table):
    """(H_KV, page_size, capacity in keys) of a contiguous (B, H_KV, N, D) cache (page_size 0) or a paged
    (pages, page_size, H_KV, D) one, whose capacity is what block_table's (B, max_pages) can address."""
    if block_table is None:
        return k_cache.shape[1], 0, k_cache.shape[2]
    page_size, h_kv = k_cache.shape[1], k_cache.shape[2]
    return h_kv, page_size, block_table.shape[1] * page_size


def decode_tiles(q, k_cache, block_table, block_n):
    """(BLOCK_M, programs along the packed rows, key tiles of the cache's capacity) of a decode launch."""
    _, H_Q, N_Q, _ = q.shape
    h_kv, _, capacity = cache_geometry(k_cache, block_table)
    rows = (H_Q // h_kv) * N_Q                                       # packed rows per KV head
    block_m = min(MAX_BLOCK_M, max(16, triton.next_power_of_2(rows)))
    return block_m, triton.cdiv(rows, block_m), triton.cdiv(capacity, block_n)


def decode_launch(q, k_cache, v_cache, cache_seqlens, block_table, o, lse, o_part, lse_part, scale,
                  num_splits, window_left, softcap, block_n, num_warps, num_stages):
    """The host side of one decode: [(kernel, grid, every argument in order, launch options)] to run in order.

    Depends only on shapes, strides, dtypes and flags: `fa2.decode` computes it once per input signature."""
    B, H_Q, N_Q, D = q.shape
    H_KV, page_size, capacity = cache_geometry(k_cache, block_table)
    if block_table is None:   # (outer, head, row, d) strides; outer is the batch row
        strides = lambda t: (t.stride(0), t.stride(1), t.stride(2), t.stride(3))
    else:                     # outer is the page
        strides = lambda t: (t.stride(0), t.stride(2), t.stride(1), t.stride(3))
    table_strides = (0, 0) if block_table is None else block_table.stride()
    block_m, m_tiles, _ = decode_tiles(q, k_cache, block_table, block_n)
    head_dim = max(16, triton.next_power_of_2(D))
    if softcap:   # s -> softcap·tanh(s·scale / softcap), then to base 2
        qk_scale, softcap_log2e = scale / softcap, softcap * LOG2E
    else:
        qk_scale, softcap_log2e = scale * LOG2E, 0.0
    split = num_splits > 1
    out, out_lse, out_strides = (o_part, lse_part, (0, 0, 0, 0)) if split else (o, lse, o.stride())
    no_tensor = q   # a pointer for arguments the kernel does not read (HAS_SEQLENS / PAGE_SIZE say so)
    launches = [(_split_kv_kernel, (B * H_KV, num_splits, m_tiles), (
        q, k_cache, v_cache, no_tensor if cache_seqlens is None else cache_seqlens,
        no_tensor if block_table is None else block_table, out, out_lse,
        *q.stride(), *strides(k_cache), *strides(v_cache), *out_strides, *table_strides,
        H_KV, N_Q, capacity, H_Q // H_KV, num_splits, qk_scale, softcap_log2e, window_left,
        page_size, cache_seqlens is not None, window_left >= 0, bool(softcap), split,
        block_m, block_n, D, head_dim), dict(num_warps=num_warps, num_stages=num_stages))]
    if split:
        splits_pow2 = triton.next_power_of_2(num_splits)
        warps = min(16, max(2, splits_pow2 * head_dim // 2048))   # at most 64 fp32 partials per thread
        launches.append((_combine_kernel, (B * H_Q * N_Q, 1, 1), (
            o_part, lse_part, o, lse, *o.stride(), H_Q, N_Q, D, num_splits, splits_pow2, head_dim),
            dict(num_warps=warps, num_stages=1)))
    return launches


def flash_decode(q, k_cache, v_cache, cache_seqlens=None, block_table=None, scale=None, num_splits=1,
                 window_left=-1, softcap=0.0, block_n=None, num_warps=4, num_stages=2):
    """Chapter 9's Flash-Decoding: (o, lse) of q (B, Hq, N_Q, D) over a contiguous (B, Hkv, N, D) or paged
    (pages, page_size, Hkv, D) cache; lse (B, Hq, N_Q) fp32 natural log. Inputs are not checked here."""
    B, H_Q, N_Q, D = q.shape
    block_n = block_n or (16 if runtime.INTERPRET else 64)
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    o = torch.empty_like(q)
    lse = torch.empty(B, H_Q, N_Q, device=q.device, dtype=torch.float32)
    o_part = lse_part = None
    if num_splits > 1:   # each split's normalised output and base-2 LSE, merged by the combine
        o_part = torch.empty(B, H_Q, N_Q, num_splits, D, device=q.device, dtype=torch.float32)
        lse_part = torch.empty(B, H_Q, N_Q, num_splits, device=q.device, dtype=torch.float32)
    for kernel, grid, args, options in decode_launch(q, k_cache, v_cache, cache_seqlens, block_table, o, lse,
                                                     o_part, lse_part, scale, num_splits, window_left,
                                                     softcap, block_n, num_warps, num_stages):
        kernel[grid](*args, **options)
    return o, lse


def num_splits_heuristic(programs, n_tiles, slots, max_splits=128):
    """FlashAttention-2's wave-efficiency rule: the fewest splits whose grid fills the GPU's `slots`
    (SMs × programs resident per SM) within 85 % of the best any split count reaches.

    programs: programs of one split (B · H_KV · M tiles); n_tiles: key tiles of the cache's capacity."""
    if programs >= 0.8 * slots:                      # the grid already fills the GPU: no split
        return 1
    max_splits = min(max_splits, slots, n_tiles)
    # s splits of n_tiles give ceil(n_tiles / s) tiles each; if s - 1 splits give the same, s adds nothing
    eligible = [s for s in range(1, max_splits + 1)
                if s == 1 or triton.cdiv(n_tiles, s) != triton.cdiv(n_tiles, s - 1)]
    waves = {s: programs * s / slots for s in eligible}
    efficiency = {s: w / math.ceil(w) for s, w in waves.items()}    # busy fraction of the last wave
    best = max(efficiency.values())
    return min(s for s in eligible if efficiency[s] >= 0.85 * best)
