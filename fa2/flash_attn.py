"""flash-attn 2.x's Python API on fa2's kernels: the same names, arguments, defaults, layouts and return values.

    from fa2 import flash_attn_func                 # instead of: from flash_attn import flash_attn_func
    o = flash_attn_func(q, k, v, causal=True)        # q (B, Nq, Hq, D); k, v (B, Nk, Hkv, D) -> o (B, Nq, Hq, D)
    o = flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=True)
    o = flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens=lengths, causal=True)

Each function transposes views (no input is copied) and calls `fa2.attention`, `fa2.attention_varlen` or
`fa2.decode` (a cache call with more than 16 new queries, or a right window, runs in pieces whose outputs it joins).
What fa2 does not compute -- dropout, ALiBi, rotary embedding inside the call, cache_batch_idx, cache_leftpad, a
paged cache in the varlen call -- raises NotImplementedError naming the argument: nothing is silently ignored.
`deterministic` is accepted: it selects flash-attn's backward, and fa2's forward is deterministic and has none.
With `return_attn_probs=True` (dropout 0) flash-attn returns (out, softmax_lse, an empty tensor); so does fa2.
"""

import numbers

import torch

from fa2.api import attention
from fa2.decoding import MAX_QUERIES, decode
from fa2.validate import check_softcap
from fa2.varlen import attention_varlen


def _unsupported(who, name, value, what):
    raise NotImplementedError(f"{who}: {name}={value!r} is not supported by fa2 ({what})")


def _check_dims(who, **tensors):
    for name, (t, ndim, layout) in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{who}: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != ndim:
            raise ValueError(f"{who}: {name} must be {ndim}-D {layout}, got shape {tuple(t.shape)}")


def _window(who, window_size):
    """flash-attn's window_size (left, right), -1 unbounded, as fa2's window: None when (-1, -1)."""
    if (not isinstance(window_size, (tuple, list)) or len(window_size) != 2
            or not all(isinstance(w, numbers.Integral) and not isinstance(w, bool) and w >= -1 for w in window_size)):
        raise ValueError(f"{who}: window_size must be (left, right), ints >= -1 (-1: unbounded), got {window_size!r}")
    return None if tuple(window_size) == (-1, -1) else (int(window_size[0]), int(window_size[1]))


def _softcap(who, softcap):
    """flash-attn's softcap (0.0: off) as fa2's: None when off. Checked as fa2.attention checks it (the same error
    and wording from every entry point)."""
    check_softcap(who, softcap)
    return float(softcap) if softcap else None


def _check_common(who, dropout_p, alibi_slopes, return_attn_probs):
    if dropout_p != 0.0:
        _unsupported(who, "dropout_p", dropout_p, "no dropout: pass 0.0, as for inference")
    if alibi_slopes is not None:
        _unsupported(who, "alibi_slopes", type(alibi_slopes).__name__, "no ALiBi bias")
    if not isinstance(return_attn_probs, bool):
        raise TypeError(f"{who}: return_attn_probs must be a bool, got {type(return_attn_probs).__name__}")


def _no_probs(q):
    """flash-attn's S_dmask when dropout_p is 0: an empty tensor."""
    return torch.empty((0,), dtype=q.dtype, device=q.device)


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                    alibi_slopes=None, deterministic=False, return_attn_probs=False):
    """flash_attn.flash_attn_func: q (B, Nq, Hq, D), k/v (B, Nk, Hkv, D) -> out (B, Nq, Hq, D) [, lse (B, Hq, Nq), S]."""
    who = "fa2.flash_attn_func"
    _check_common(who, dropout_p, alibi_slopes, return_attn_probs)
    _check_dims(who, q=(q, 4, "(batch, seqlen_q, nheads, headdim)"), k=(k, 4, "(batch, seqlen_k, nheads_k, headdim)"),
                v=(v, 4, "(batch, seqlen_k, nheads_k, headdim)"))
    o, lse = attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal, scale=softmax_scale,
                       return_lse=True, window=_window(who, window_size), softcap=_softcap(who, softcap))
    out = o.transpose(1, 2)                             # o was allocated in q's (B, Nq, Hq, D) memory order
    return (out, lse, _no_probs(q)) if return_attn_probs else out


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None):
    """flash_attn.flash_attn_varlen_func: packed q (total_q, Hq, D), k/v (total_k, Hkv, D) -> out (total_q, Hq, D)
    [, lse (Hq, total_q), S]."""
    who = "fa2.flash_attn_varlen_func"
    _check_common(who, dropout_p, alibi_slopes, return_attn_probs)
    if block_table is not None:
        _unsupported(who, "block_table", type(block_table).__name__,
                     "no paged keys in the varlen call: use flash_attn_with_kvcache for a paged cache")
    out, lse = attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
                                scale=softmax_scale, window=_window(who, window_size),
                                softcap=_softcap(who, softcap), return_lse=True)
    return (out, lse, _no_probs(q)) if return_attn_probs else out


def _append(cache, new, cache_seqlens, block_table):
    """Write new (B, n, Hkv, D) into cache at positions cache_seqlens[b] + 0..n-1 of row b, in place, with
    device-side indices (no host sync). cache is (B, N, Hkv, D), or (pages, page_size, Hkv, D) with block_table.
    A position past the cache's capacity is an index error (a device-side assert on a GPU), never a silent write."""
    B, n = new.shape[:2]
    positions = cache_seqlens.long()[:, None] + torch.arange(n, device=new.device)         # (B, n)
    if block_table is None:
        rows = torch.arange(B, device=new.device)[:, None].expand(B, n)
        cache[rows, positions] = new
    else:
        page_size = cache.shape[1]
        pages = block_table.long().gather(1, positions // page_size)                        # (B, n)
        cache[pages, positions % page_size] = new


def _decode_window(left):
    return None if left < 0 else (left, -1)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False):
    """flash_attn.flash_attn_with_kvcache: append k/v (B, n, Hkv, D) into the cache in place at cache_seqlens, then
    attend q (B, Nq, Hq, D) over each row's first cache_seqlens (+ n) keys -> out (B, Nq, Hq, D) [, lse (B, Hq, Nq)].

    The cache is (B, N, Hkv, D), or (num_pages, page_size, Hkv, D) with block_table (B, max_pages) int32. Query i
    sits at position seqlen_k - Nq + i (bottom-right), as in flash-attn. fa2.decode is causal inside the query block
    and takes at most 16 queries; causal calls with more run as blocks of 16, and non-causal calls with several
    queries (rare: a query that sees keys after it) run one query at a time: the same result, more launches."""
    who = "fa2.flash_attn_with_kvcache"
    for name, value, what in (("rotary_cos", rotary_cos, "no rotary embedding inside the call: rotate q and k first"),
                              ("rotary_sin", rotary_sin, "no rotary embedding inside the call: rotate q and k first"),
                              ("cache_batch_idx", cache_batch_idx, "cache rows are the batch rows"),
                              ("cache_leftpad", cache_leftpad, "each cache row starts at position 0"),
                              ("alibi_slopes", alibi_slopes, "no ALiBi bias")):
        if value is not None:
            _unsupported(who, name, type(value).__name__, what)
    layout = "(batch, seqlen_cache, nheads_k, headdim)" if block_table is None else \
        "(num_pages, page_size, nheads_k, headdim)"
    _check_dims(who, q=(q, 4, "(batch, seqlen_q, nheads, headdim)"), k_cache=(k_cache, 4, layout),
                v_cache=(v_cache, 4, layout))
    if (k is None) != (v is None):
        raise ValueError(f"{who}: pass both k and v (the new keys and values) or neither")
    if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral) or num_splits < 0:
        raise ValueError(f"{who}: num_splits must be an int >= 0 (0: a heuristic), got {num_splits!r}")
    if not isinstance(causal, bool):
        raise TypeError(f"{who}: causal must be a bool, got {type(causal).__name__}")
    window, softcap = _window(who, window_size), _softcap(who, softcap)
    B, n_q = q.shape[:2]
    if isinstance(cache_seqlens, numbers.Integral) and not isinstance(cache_seqlens, bool):
        cache_seqlens = torch.full((B,), int(cache_seqlens), dtype=torch.int32, device=q.device)
    elif cache_seqlens is not None and not isinstance(cache_seqlens, torch.Tensor):
        raise TypeError(f"{who}: cache_seqlens must be None, an int or an int32 tensor (batch,), "
                        f"got {type(cache_seqlens).__name__}")
    if k is not None:
        if cache_seqlens is None:
            raise ValueError(f"{who}: cache_seqlens is needed with k and v: it says where they are appended")
        _check_dims(who, k=(k, 4, "(batch, seqlen_new, nheads_k, headdim)"),
                    v=(v, 4, "(batch, seqlen_new, nheads_k, headdim)"))
        if v.shape != k.shape or k.shape[0] != B or k.shape[2:] != k_cache.shape[2:]:
            raise ValueError(f"{who}: k and v must be (batch={B}, seqlen_new, {k_cache.shape[2]}, {k_cache.shape[3]}) "
                             f"like q's batch and the cache's heads and head dim, got {tuple(k.shape)} and "
                             f"{tuple(v.shape)}")
        if k.dtype != k_cache.dtype or v.dtype != v_cache.dtype:
            raise TypeError(f"{who}: k and v must have the cache's dtype {k_cache.dtype}, got {k.dtype}, {v.dtype}")
        if cache_seqlens.dtype != torch.int32 or cache_seqlens.shape != (B,):
            raise ValueError(f"{who}: cache_seqlens must be int32 of shape ({B},), got {cache_seqlens.dtype} "
                             f"{tuple(cache_seqlens.shape)}")
        _append(k_cache, k, cache_seqlens, block_table)
        _append(v_cache, v, cache_seqlens, block_table)
        cache_seqlens = cache_seqlens + k.shape[1]       # the keys each query block sees end here

    paged = block_table is not None
    kc, vc = (k_cache, v_cache) if paged else (k_cache.transpose(1, 2), v_cache.transpose(1, 2))   # (B, Hkv, N, D)
    q_bhnd = q.transpose(1, 2)                                                                      # (B, Hq, Nq, D)
    left = -1 if window is None else window[0]
    right = 0 if causal else (-1 if window is None else window[1])   # flash-attn: causal means right bound 0

    def run(rows, seqlens, left_bound):
        return decode(q_bhnd[:, :, rows], kc, vc, seqlens, block_table, softmax_scale, num_splits or None,
                      return_lse=True, window=_decode_window(left_bound), softcap=softcap)

    if n_q == 1 or right == 0:                       # what fa2.decode computes, in blocks of <= MAX_QUERIES
        if n_q <= MAX_QUERIES:
            o, lse = run(slice(None), cache_seqlens, left)
            out = o.transpose(1, 2)                  # o was allocated in q's memory order
            return (out, lse) if return_softmax_lse else out
        calls = []
        seqlens = _full_lengths(cache_seqlens, k_cache, block_table, B, q.device)
        for start in range(0, n_q, MAX_QUERIES):     # query i keeps position seqlen_k - n_q + i
            stop = min(start + MAX_QUERIES, n_q)
            calls.append(run(slice(start, stop), seqlens - (n_q - stop), left))
    else:                                            # query i sees up to min(its position + right, the end)
        calls = []
        seqlens = _full_lengths(cache_seqlens, k_cache, block_table, B, q.device)
        for i in range(n_q):
            shift = n_q - 1 - i if right < 0 else min(right, n_q - 1 - i)     # its last key's offset past it
            calls.append(run(slice(i, i + 1), seqlens - (n_q - 1 - i - shift), left + shift if left >= 0 else -1))
    out = torch.cat([o.transpose(1, 2) for o, _ in calls], dim=1)
    return (out, torch.cat([lse for _, lse in calls], dim=2)) if return_softmax_lse else out


def _full_lengths(cache_seqlens, k_cache, block_table, B, device):
    """cache_seqlens, or every row's capacity as an int32 tensor when it is None."""
    if cache_seqlens is not None:
        return cache_seqlens
    capacity = k_cache.shape[1] * (1 if block_table is None else block_table.shape[1])
    return torch.full((B,), capacity, dtype=torch.int32, device=k_cache.device)
