"""fa2's flash-attn 2.x signatures (fa2/flash_attn.py) against an fp64 reference with flash-attn's semantics: layouts,
GQA, varlen, the KV-cache append (what is written and what is not), windows, softcap, and every unsupported argument."""
import math

import pytest
import torch

from fa2 import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache, runtime
from fa2.chapters.decode_reference import random_cache

DEVICE = runtime.DEVICE


def reference(q, k, v, causal=False, window=(-1, -1), softcap=0.0, scale=None):
    """fp64 flash-attn semantics on (B, N, H, D): query i at position i + Nk - Nq sees keys j with
    pos - left <= j <= pos + right (right 0 if causal; -1 unbounded); softcap c: s -> c tanh(s / c).
    Returns o (B, Nq, Hq, D) and lse (B, Hq, Nq); rows with no key: 0 and -inf."""
    (Nq, Hq, D), (Nk, Hkv) = q.shape[1:], k.shape[1:3]
    scale = 1 / math.sqrt(D) if scale is None else scale
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    k, v = (t.repeat_interleave(Hq // Hkv, dim=1) for t in (k, v))
    s = q @ k.transpose(-1, -2) * scale                                     # (B, Hq, Nq, Nk)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    pos = torch.arange(Nq, device=q.device)[:, None] + Nk - Nq
    j = torch.arange(Nk, device=q.device)[None, :]
    left, right = window[0], 0 if causal else window[1]
    visible = torch.ones(Nq, Nk, dtype=torch.bool, device=q.device)
    if right >= 0:
        visible &= j <= pos + right
    if left >= 0:
        visible &= j >= pos - left
    s = s.masked_fill(~visible, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    return (p @ v).transpose(1, 2), lse


def randn(*shape, dtype=torch.float16, seed=0):
    gen = torch.Generator(DEVICE).manual_seed(seed)
    return torch.randn(shape, device=DEVICE, generator=gen).to(dtype)


def assert_close(o, ref, dtype):
    tol = 1e-2 if dtype == torch.bfloat16 else 2e-3
    assert torch.isfinite(o).all(), "NaN/inf in the output"
    torch.testing.assert_close(o.double(), ref, atol=tol, rtol=tol)


def assert_lse_close(lse, ref):
    assert lse.dtype == torch.float32
    seen = torch.isfinite(ref)
    assert torch.equal(torch.isneginf(lse), ~seen), "lse must be -inf exactly for rows that see no key"
    torch.testing.assert_close(lse[seen].double(), ref[seen], atol=1e-4, rtol=1e-5)


# ---- flash_attn_func ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("Nq, Nk, Hq, Hkv, dtype", [(37, 37, 4, 2, torch.float16), (19, 50, 4, 1, torch.bfloat16),
                                                    (50, 19, 2, 2, torch.float16)])
def test_flash_attn_func(Nq, Nk, Hq, Hkv, dtype, causal):
    q, k, v = randn(2, Nq, Hq, 32, dtype=dtype), randn(2, Nk, Hkv, 32, dtype=dtype, seed=1), \
        randn(2, Nk, Hkv, 32, dtype=dtype, seed=2)
    out, lse, probs = flash_attn_func(q, k, v, causal=causal, return_attn_probs=True)
    ref, ref_lse = reference(q, k, v, causal)
    assert out.shape == q.shape and out.dtype == dtype and out.is_contiguous()
    assert lse.shape == (2, Hq, Nq) and probs.numel() == 0        # flash-attn's S_dmask without dropout: empty
    assert_close(out, ref, dtype)
    assert_lse_close(lse, ref_lse)


def test_flash_attn_func_scale_and_strided_inputs():
    qkv = randn(1, 40, 3, 4, 16)                                    # a packed qkv buffer: strided views
    q, k, v = qkv.unbind(2)
    out = flash_attn_func(q, k, v, softmax_scale=0.3, causal=True)
    assert_close(out, reference(q, k, v, True, scale=0.3)[0], q.dtype)


@pytest.mark.parametrize("causal, window, softcap", [(True, (8, -1), 0.0), (False, (5, 3), 0.0), (True, (-1, -1), 2.0),
                                                     (False, (4, 0), 1.5)])
def test_flash_attn_func_window_and_softcap(causal, window, softcap):
    q, k, v = randn(2, 30, 4, 32), randn(2, 45, 2, 32, seed=1), randn(2, 45, 2, 32, seed=2)
    out = flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap)
    assert_close(out, reference(q, k, v, causal, window, softcap)[0], q.dtype)


# ---- flash_attn_varlen_func ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_varlen_func(causal):
    lengths_q, lengths_k = [1, 37, 0, 20], [5, 37, 3, 64]           # a lone query, Nq == Nk, empty, a tail
    Hq, Hkv, D = 4, 2, 32
    q, k, v = randn(sum(lengths_q), Hq, D), randn(sum(lengths_k), Hkv, D, seed=1), randn(sum(lengths_k), Hkv, D, seed=2)
    cu = lambda n: torch.tensor([0, *torch.tensor(n).cumsum(0).tolist()], dtype=torch.int32, device=DEVICE)
    out, lse, probs = flash_attn_varlen_func(q, k, v, cu(lengths_q), cu(lengths_k), max(lengths_q), max(lengths_k),
                                             causal=causal, return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (Hq, q.shape[0]) and probs.numel() == 0
    starts_q, starts_k = cu(lengths_q).tolist(), cu(lengths_k).tolist()
    for b in range(len(lengths_q)):
        sq, sk = slice(starts_q[b], starts_q[b + 1]), slice(starts_k[b], starts_k[b + 1])
        if sq.stop == sq.start:
            continue
        ref, ref_lse = reference(q[None, sq], k[None, sk], v[None, sk], causal)
        assert_close(out[sq], ref[0], q.dtype)
        assert_lse_close(lse[:, sq], ref_lse[0])


# ---- flash_attn_with_kvcache --------------------------------------------------------------------------------------

def bnhd_cache(B, capacity, Hkv, D, lengths, dtype=torch.float16, seed=0):
    """(B, N, Hkv, D) caches as flash-attn lays them out, NaN past each row's length."""
    gen = torch.Generator(DEVICE).manual_seed(seed)
    k, v, _ = random_cache(B, Hkv, capacity, D, dtype, lengths, layout="bnhd", generator=gen)
    return k.transpose(1, 2), v.transpose(1, 2)               # the (B, N, Hkv, D) buffers


def seqlens(*values):
    return torch.tensor(values, dtype=torch.int32, device=DEVICE)


def kvcache_reference(q, k_cache, v_cache, lengths, causal, window=(-1, -1), softcap=0.0):
    """Each batch row against the first lengths[b] keys of its (B, N, Hkv, D) cache row."""
    outs, lses = [], []
    for b, n in enumerate(lengths.tolist()):
        o, lse = reference(q[b:b + 1], k_cache[b:b + 1, :n], v_cache[b:b + 1, :n], causal, window, softcap)
        outs.append(o)
        lses.append(lse)
    return torch.cat(outs), torch.cat(lses)


@pytest.mark.parametrize("Nq, causal", [(1, False), (4, True), (20, True), (3, False)])
def test_kvcache_appends_in_place_then_attends(Nq, causal):
    B, capacity, Hq, Hkv, D = 3, 64, 4, 2, 32
    lengths = seqlens(0, 17, 40)
    k_cache, v_cache = bnhd_cache(B, capacity, Hkv, D, lengths)
    before_k, before_v = k_cache.clone(), v_cache.clone()
    q, k_new, v_new = randn(B, Nq, Hq, D, seed=3), randn(B, Nq, Hkv, D, seed=4), randn(B, Nq, Hkv, D, seed=5)
    out, lse = flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=lengths, causal=causal,
                                       return_softmax_lse=True)
    for cache, before, new in ((k_cache, before_k, k_new), (v_cache, before_v, v_new)):
        expected = before.clone()
        for b, n in enumerate(lengths.tolist()):
            expected[b, n:n + Nq] = new[b]
        # written exactly at [length, length + Nq) of each row; everything else (NaN past it) untouched
        torch.testing.assert_close(cache, expected, rtol=0, atol=0, equal_nan=True)
    ref, ref_lse = kvcache_reference(q, k_cache, v_cache, lengths + Nq, causal)
    assert out.shape == q.shape and out.is_contiguous() and lse.shape == (B, Hq, Nq)
    assert_close(out, ref, q.dtype)
    assert_lse_close(lse, ref_lse)


@pytest.mark.parametrize("causal, window, softcap", [(True, (6, -1), 0.0), (False, (6, 1), 0.0), (False, (-1, 0), 0.0),
                                                     (False, (3, -1), 1.5), (True, (-1, -1), 2.0)])
def test_kvcache_windows_and_softcap_with_several_queries(causal, window, softcap):
    B, capacity, Hq, Hkv, D, Nq = 2, 48, 2, 1, 16, 4
    lengths = seqlens(30, 9)
    k_cache, v_cache = bnhd_cache(B, capacity, Hkv, D, lengths)
    q = randn(B, Nq, Hq, D, seed=3)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, causal=causal, window_size=window,
                                  softcap=softcap)
    assert_close(out, kvcache_reference(q, k_cache, v_cache, lengths, causal, window, softcap)[0], q.dtype)


def test_kvcache_paged_append():
    B, Hq, Hkv, D, page_size, max_pages, Nq = 2, 4, 2, 32, 16, 4, 3
    lengths = seqlens(5, 50)
    gen = torch.Generator(DEVICE).manual_seed(0)
    k_pages, v_pages, table = random_cache(B, Hkv, page_size * max_pages, D, torch.bfloat16, lengths, page_size,
                                           generator=gen)
    before = k_pages.clone(), v_pages.clone()
    q, k_new, v_new = (randn(B, Nq, h, D, dtype=torch.bfloat16, seed=s) for h, s in ((Hq, 3), (Hkv, 4), (Hkv, 5)))
    out = flash_attn_with_kvcache(q, k_pages, v_pages, k_new, v_new, cache_seqlens=lengths, block_table=table,
                                  causal=True)
    rows = []
    for cache, old, new in zip((k_pages, v_pages), before, (k_new, v_new)):
        expected = old.clone()
        for b, n in enumerate(lengths.tolist()):
            for j in range(Nq):
                expected[table[b, (n + j) // page_size], (n + j) % page_size] = new[b, j]
        torch.testing.assert_close(cache, expected, rtol=0, atol=0, equal_nan=True)
        rows.append(cache[table.long()].flatten(1, 2))                     # (B, max_pages * page_size, Hkv, D)
    assert_close(out, kvcache_reference(q, *rows, lengths + Nq, True)[0], q.dtype)


def test_kvcache_seqlens_int_and_none():
    B, capacity, Hkv, D = 2, 24, 1, 16
    k_cache, v_cache = bnhd_cache(B, capacity, Hkv, D, seqlens(capacity, capacity))
    q = randn(B, 1, 2, D, seed=3)
    full = flash_attn_with_kvcache(q, k_cache, v_cache)                               # whole cache
    assert_close(full, kvcache_reference(q, k_cache, v_cache, seqlens(capacity, capacity), False)[0], q.dtype)
    k_new, v_new = randn(B, 1, Hkv, D, seed=4), randn(B, 1, Hkv, D, seed=5)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k_new, v_new, cache_seqlens=10)  # an int, as flash-attn takes
    assert torch.equal(k_cache[:, 10], k_new[:, 0]) and torch.equal(v_cache[:, 10], v_new[:, 0])
    assert_close(out, kvcache_reference(q, k_cache, v_cache, seqlens(11, 11), False)[0], q.dtype)


@pytest.mark.skipif(DEVICE == "cuda", reason="on a GPU the index error is a device-side assert, which leaves the "
                    "process's CUDA context unusable for every later test")
def test_kvcache_append_past_capacity_raises():
    k_cache, v_cache = bnhd_cache(1, 16, 1, 16, seqlens(15))
    k_new = randn(1, 2, 1, 16)
    with pytest.raises(IndexError):
        flash_attn_with_kvcache(randn(1, 2, 1, 16), k_cache, v_cache, k_new, k_new, cache_seqlens=seqlens(15))


# ---- arguments fa2 does not support, and bad ones -----------------------------------------------------------------

def _small():
    return randn(1, 8, 2, 16), randn(1, 8, 2, 16, seed=1), randn(1, 8, 2, 16, seed=2)


def _call(fn, **kwargs):
    q, k, v = _small()
    if fn is flash_attn_func:
        return fn(q, k, v, **kwargs)
    if fn is flash_attn_varlen_func:
        cu = seqlens(0, 8)
        return fn(q[0], k[0], v[0], cu, cu, 8, 8, **kwargs)
    return fn(q[:, :1], k, v, **kwargs)


UNSUPPORTED = [
    (flash_attn_func, dict(dropout_p=0.1), "dropout_p"),
    (flash_attn_func, dict(alibi_slopes=torch.zeros(2)), "alibi_slopes"),
    (flash_attn_func, dict(dropout_p=0.1, return_attn_probs=True), "dropout_p"),
    (flash_attn_varlen_func, dict(dropout_p=0.5), "dropout_p"),
    (flash_attn_varlen_func, dict(alibi_slopes=torch.zeros(2)), "alibi_slopes"),
    (flash_attn_varlen_func, dict(block_table=torch.zeros(1, 1, dtype=torch.int32)), "block_table"),
    (flash_attn_with_kvcache, dict(rotary_cos=torch.ones(8, 8), rotary_sin=torch.zeros(8, 8)), "rotary_cos"),
    (flash_attn_with_kvcache, dict(rotary_sin=torch.zeros(8, 8)), "rotary_sin"),
    (flash_attn_with_kvcache, dict(cache_batch_idx=torch.zeros(1, dtype=torch.int32)), "cache_batch_idx"),
    (flash_attn_with_kvcache, dict(cache_leftpad=torch.zeros(1, dtype=torch.int32)), "cache_leftpad"),
    (flash_attn_with_kvcache, dict(alibi_slopes=torch.zeros(2)), "alibi_slopes"),
]


@pytest.mark.parametrize("fn, kwargs, name", UNSUPPORTED, ids=lambda x: getattr(x, "__name__", None))
def test_unsupported_arguments_raise_naming_themselves(fn, kwargs, name):
    with pytest.raises(NotImplementedError, match=rf"\b{name}="):
        _call(fn, **kwargs)


@pytest.mark.parametrize("fn", [flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache],
                         ids=lambda f: f.__name__)
def test_defaults_and_deterministic_are_accepted(fn):
    """flash-attn's defaults compute; deterministic=True is kept (the forward is deterministic, there is no
    backward): a call with it gives the call without it, bit for bit."""
    kwargs = {} if fn is flash_attn_with_kvcache else dict(deterministic=True)
    assert torch.equal(_call(fn, **kwargs), _call(fn))


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(window_size=(-2, 0)), ValueError, "window_size"),
    (dict(window_size=4), ValueError, "window_size"),
    (dict(softcap=-1.0), TypeError, "flash_attn_func: softcap must be"),     # as fa2.attention's check words it
    (dict(softcap=float("nan")), TypeError, "flash_attn_func: softcap must be"),
    (dict(return_attn_probs=1), TypeError, "return_attn_probs"),
])
def test_flash_attn_func_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        _call(flash_attn_func, **kwargs)


def test_flash_attn_func_wants_bnhd():
    q, k, v = _small()
    with pytest.raises(ValueError, match=r"q must be 4-D \(batch, seqlen_q"):
        flash_attn_func(q[0], k, v)


@pytest.mark.parametrize("change, exc, match", [
    (lambda a: a.update(v=None), ValueError, "both k and v"),
    (lambda a: a.update(cache_seqlens=None), ValueError, "cache_seqlens is needed"),
    (lambda a: a.update(cache_seqlens=a["cache_seqlens"].long()), ValueError, "cache_seqlens must be int32"),
    (lambda a: a.update(cache_seqlens=1.5), TypeError, "cache_seqlens must be None, an int"),
    (lambda a: a.update(k=a["k"][:, :, :, :8]), ValueError, "k and v must be"),
    (lambda a: a.update(num_splits=-1), ValueError, "num_splits"),
    (lambda a: a.update(causal=1), TypeError, "causal"),
])
def test_kvcache_bad_arguments(change, exc, match):
    k_cache, v_cache = bnhd_cache(1, 16, 1, 16, seqlens(4))
    args = dict(q=randn(1, 1, 2, 16), k_cache=k_cache, v_cache=v_cache, k=randn(1, 1, 1, 16), v=randn(1, 1, 1, 16),
                cache_seqlens=seqlens(4))
    change(args)
    with pytest.raises(exc, match=match):
        flash_attn_with_kvcache(**args)
