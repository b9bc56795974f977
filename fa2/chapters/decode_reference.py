"""Chapter 9's checks: an fp64 reference of decoding over a KV cache, and random caches to run it on."""
import math

import torch

from fa2 import runtime


def cache_rows(cache, block_table, b, n):
    """(H_KV, n, D): rows 0..n-1 of batch row b of a contiguous (B, H_KV, N, D) or paged cache."""
    if block_table is None:
        return cache[b, :, :n]
    page_size = cache.shape[1]
    pages = block_table[b, :math.ceil(n / page_size)].long()
    return cache[pages].flatten(0, 1)[:n].transpose(0, 1)            # (n, H_KV, D) -> (H_KV, n, D)


def decode_reference(q, k_cache, v_cache, cache_seqlens=None, block_table=None, scale=None, window=None,
                     softcap=None, dtype=torch.float64):
    """(o, lse) of decoding, in fp64: query i of N_Q sits at pos_i = cache_seqlens[b] - N_Q + i and sees the
    keys j with pos_i - left <= j <= pos_i (left = window[0], -1: no bound). o = 0, lse = -inf: no key."""
    B, H_Q, N_Q, D = q.shape
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    capacity = k_cache.shape[2] if block_table is None else block_table.shape[1] * k_cache.shape[1]
    lengths = [capacity] * B if cache_seqlens is None else cache_seqlens.tolist()
    left = -1 if window is None else window[0]
    o = torch.zeros(B, H_Q, N_Q, D, dtype=dtype, device=q.device)
    lse = torch.full((B, H_Q, N_Q), -math.inf, dtype=dtype, device=q.device)
    for b, n in enumerate(lengths):
        k = cache_rows(k_cache, block_table, b, n).to(dtype)           # (H_KV, n, D)
        v = cache_rows(v_cache, block_table, b, n).to(dtype)
        H_KV = k.shape[0]
        q_b = q[b].to(dtype).reshape(H_KV, H_Q // H_KV * N_Q, D)        # a group's heads share k, v
        s = q_b @ k.transpose(-1, -2) * scale                            # (H_KV, group · N_Q, n)
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        i = torch.arange(H_Q // H_KV * N_Q, device=q.device) % N_Q       # each row's query index
        pos = (n - N_Q + i)[:, None]                                     # (group · N_Q, 1)
        j = torch.arange(n, device=q.device)[None, :]
        visible = j <= pos
        if left >= 0:
            visible &= j >= pos - left
        s = s.masked_fill(~visible, -math.inf)
        lse_b = torch.logsumexp(s, dim=-1)                               # -inf: the row sees no key
        p = torch.exp(s - torch.where(torch.isinf(lse_b), 0.0, lse_b)[..., None])
        o[b] = (p @ v).view(H_Q, N_Q, D)
        lse[b] = lse_b.view(H_Q, N_Q)
    return o, lse


def poison_past(cache, block_table, cache_seqlens):
    """Write NaN into every position of a cache at or past each row's length (in place)."""
    for b, n in enumerate(cache_seqlens.tolist()):
        if block_table is None:
            cache[b, :, n:] = math.nan
        elif n < block_table.shape[1] * cache.shape[1]:
            pages = block_table[b].long()
            rows = cache[pages].flatten(0, 1)                              # (max_pages · page_size, H_KV, D)
            rows[n:] = math.nan
            cache[pages] = rows.view(len(pages), *cache.shape[1:])


def random_cache(B, H_KV, capacity, D, dtype, cache_seqlens, page_size=None, layout="bhnd", device=None,
                 generator=None):
    """(k_cache, v_cache, block_table) holding N(0, 1) keys and values in positions [0, cache_seqlens[b]) of
    each row and NaN everywhere else -- past each prefix and in unused pages -- so a read there shows.

    page_size None: contiguous (B, H_KV, capacity, D) caches ("bnhd": a (B, N, H_KV, D) buffer seen through
    a transpose), block_table None. Otherwise (pages, page_size, H_KV, D) with two spare pages, and a
    block_table (B, capacity / page_size) int32 whose pages are in random order."""
    device = device or runtime.DEVICE
    if page_size is None:
        shape = (B, H_KV, capacity, D) if layout == "bhnd" else (B, capacity, H_KV, D)
        caches = [torch.randn(shape, device=device, generator=generator).to(dtype) for _ in range(2)]
        caches = caches if layout == "bhnd" else [c.transpose(1, 2) for c in caches]
        block_table = None
    else:
        max_pages = math.ceil(capacity / page_size)
        num_pages = B * max_pages + 2
        order = torch.randperm(num_pages, device=device, generator=generator)
        block_table = order[:B * max_pages].view(B, max_pages).to(torch.int32)
        caches = [torch.randn(num_pages, page_size, H_KV, D, device=device, generator=generator).to(dtype)
                  for _ in range(2)]
        for cache in caches:
            cache[order[B * max_pages:]] = math.nan                          # the spare pages
    for cache in caches:
        poison_past(cache, block_table, cache_seqlens)
    return caches[0], caches[1], block_table
