"""The project's one measuring harness: checks against fp64 and SDPA, one error metric, one timer.

    check_attention(my_attention, B=2, Hq=4, Hkv=2, Nq=37, Nk=70, D=32, dtype=torch.bfloat16, causal=True)

draws new inputs, runs ``my_attention(q, k, v, causal=..., scale=...) -> o`` (or ``(o, lse)``) and asserts that
the output is finite, within ``error_bounds`` of the fp64 reference (bounds derived from the dtype's unit
roundoff and the reduction lengths, chapter 7), no more than twice as far from it as SDPA is on the same
inputs, and that the LSE is within its (fp32) bound.

    ms = time_ms(fn, inputs=[(q, k, v), ...])               # median ms per call, input sets rotated past L2

``rel_err`` (max |x - ref| / max |ref|) is the error every check, the autotuner and the benchmark report.
Everything that times a kernel -- chapters, autotune, ``python -m fa2.bench``, the GPU scripts -- calls
``time_ms``.
"""


import importlib.util
import inspect
import itertools
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import triton
import triton.testing

import torch
import torch.nn.functional as F

from . import runtime
from .chapters.reference import attention_reference, visible_keys
from .chapters.varlen_reference import masked_attention_reference, random_varlen, varlen_reference, visible_window

LAYOUTS = ("bhnd", "bnhd", "strided")


def make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype, layout="bhnd", device=None, generator=None):
    """Fresh N(0, 1) q (B,Hq,Nq,D), k, v (B,Hkv,Nk,D); layout "bnhd" is a transposed (B,N,H,D) buffer,
    "strided" a view that skips every other head-dim element (no stride of 1 anywhere)."""
    device = device or runtime.DEVICE

    def one(H, N):
        if layout == "bhnd":
            return torch.randn(B, H, N, D, device=device, generator=generator).to(dtype)
        if layout == "bnhd":
            return torch.randn(B, N, H, D, device=device, generator=generator).to(dtype).transpose(1, 2)
        if layout == "strided":
            return torch.randn(B, N, H, 2 * D, device=device, generator=generator).to(dtype).transpose(1, 2)[..., ::2]
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")

    return one(Hq, Nq), one(Hkv, Nk), one(Hkv, Nk)


def sdpa_reference(q, k, v, causal=False, scale=None, window=None):
    """SDPA with the package's conventions (bottom-right causal, GQA, flash-attn's window); rows with no
    visible key give 0."""
    Nq, Nk = q.shape[2], k.shape[2]
    masked = causal or window is not None
    mask = visible_window(Nq, Nk, causal, window, q.device) if window else visible_keys(Nq, Nk, causal, q.device)
    rows_seen = mask.any(-1)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if masked else None, scale=scale,
                                       enable_gqa=q.shape[1] != k.shape[1])
    return torch.where(rows_seen[:, None], o, torch.zeros((), dtype=o.dtype, device=o.device))


def rel_err(x, ref):
    """max |x - ref| over max |ref| (NaN if x has a NaN): one number per comparison."""
    x, ref = x.double(), ref.double()
    return ((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


# Unit roundoff u of each input dtype (half the distance from 1 to the next number) and of fp32, the kernels'
# arithmetic. The bounds below are derived from them in chapter 7, section 7.2.
UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}
FP32_ROUNDOFF = 2.0**-24
SLACK = 2.0     # the first-order bounds are doubled: second-order terms, approximate exp/log, tensor-core sums


def error_bounds(q, k, v, causal=False, scale=None, window=None, softcap=None):
    """Per-element bound on |o - o_ref| (B, Hq, Nq, D) and per-row bound on |lse - lse_ref| (B, Hq, Nq) for a
    kernel that keeps its softmax state in fp32 and rounds only p (before P @ V) and o to the input dtype.

    With a softcap c the score c·tanh(s/c) passes the error of s on with a factor sech^2 <= 1 and adds the
    error of tanh evaluated from exp2 (a few fp32 roundings of a number <= 1, counted as 10 u32) times c."""
    u, u32 = UNIT_ROUNDOFF[q.dtype], FP32_ROUNDOFF
    (D, N_KV), group = (q.shape[-1], k.shape[2]), q.shape[1] // k.shape[1]
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    qa = q.double().abs()
    ka = k.double().abs().repeat_interleave(group, dim=1)
    dot_abs = (qa @ ka.transpose(-1, -2)).amax(dim=(-1, -2)) * scale       # (B, Hq): max scale*sum|q_d k_d|
    score_err = (D + 2) * u32 * dot_abs                                      # fp32 dot of D terms, scale
    if softcap:
        score_err = score_err + 10 * softcap * u32
    weight_err = 2 * score_err + (N_KV + 4) * u32                            # (B, Hq): relative error of p, l
    if window is None and not softcap:
        o, lse = attention_reference(q, k, v, causal, scale, return_lse=True)
        weighted_abs_v = attention_reference(q, k, v.abs(), causal, scale)  # sum_j p_j |v_j| / l
    else:
        o, lse = masked_attention_reference(q, k, v, causal, scale, window, softcap, return_lse=True)
        weighted_abs_v = masked_attention_reference(q, k, v.abs(), causal, scale, window, softcap)
    o_bound = u * o.abs() + (u + 2 * weight_err[..., None, None]) * weighted_abs_v
    lse_bound = weight_err[..., None] + 4 * u32 * (lse.abs() + dot_abs[..., None])
    return SLACK * o_bound, SLACK * lse_bound


def _bound_used(diff, bound):
    """max |diff| / bound over the elements (0 where diff is 0, so an exact 0 meets a bound of 0)."""
    diff = diff.abs()
    return torch.where(diff == 0, 0.0, diff / bound).max().item() if diff.numel() else 0.0


def _check_output(o, lse, ref, ref_lse, o_bound, lse_bound):
    """Assert o (and lse, if not None) within the derived bounds of the fp64 reference; the errors as a dict."""
    assert o.shape == ref.shape, f"output shape {tuple(o.shape)}, expected {tuple(ref.shape)}"
    assert torch.isfinite(o).all(), "output has NaN/inf (unwritten rows or a 0/0)"
    err = rel_err(o, ref)
    excess = _bound_used(o.double() - ref.to(o.device), o_bound.to(o.device))
    assert excess <= 1, f"output error is {excess:.2g} times its derived bound (err {err:.2e})"
    result = {"err": err, "bound_used": excess}
    if lse is not None:
        assert lse.shape == ref_lse.shape and lse.dtype == torch.float32, f"lse {tuple(lse.shape)} {lse.dtype}"
        seen = torch.isfinite(ref_lse)
        assert torch.isneginf(lse[~seen.to(lse.device)]).all(), "rows with no visible key must have lse = -inf"
        lse_err = (lse[seen].double() - ref_lse[seen].to(lse.device)).abs()
        lse_excess = _bound_used(lse_err, lse_bound[seen].to(lse.device))
        assert lse_excess <= 1, (f"lse error {lse_err.max().item():.2e} is {lse_excess:.2g} times its derived "
                                 f"bound {lse_bound[seen].min().item():.1e}..{lse_bound[seen].max().item():.1e}")
        result["lse_err"] = lse_err.max().item() if seen.any() else 0.0
        result["lse_bound_used"] = lse_excess
    return result


def check_attention(fn, B=2, Hq=4, Hkv=None, Nq=64, Nk=None, D=32, dtype=torch.float16, causal=False,
                    layout="bhnd", scale=None, check_lse=True, verbose=False, window=None, softcap=None):
    """Run fn on fresh inputs and assert it matches the fp64 reference within the derived bounds and as well
    as SDPA does (SDPA has no softcap: with one, the bounds alone). Returns the errors.

    fn(q, k, v, causal=, scale=) -> o or (o, lse); it also gets window= and softcap= when they are not None."""
    Hkv = Hq if Hkv is None else Hkv
    Nk = Nq if Nk is None else Nk
    q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype, layout)
    extra = {name: x for name, x in (("window", window), ("softcap", softcap)) if x is not None}
    out = fn(q, k, v, causal=causal, scale=scale, **extra)
    o, lse = out if isinstance(out, tuple) else (out, None)
    assert o.dtype == q.dtype, f"output dtype {o.dtype}, input {q.dtype}"
    if window is None and not softcap:
        ref, ref_lse = attention_reference(q, k, v, causal, scale, return_lse=True)
    else:
        ref, ref_lse = masked_attention_reference(q, k, v, causal, scale, window, softcap, return_lse=True)
    o_bound, lse_bound = error_bounds(q, k, v, causal, scale, window, softcap)
    result = _check_output(o, lse if check_lse else None, ref, ref_lse, o_bound, lse_bound)
    err = result["err"]
    if not softcap:
        # SDPA computes with q, k, v upcast on the CPU when the GPU has no kernel for the combination
        sdpa_err = result["sdpa_err"] = rel_err(sdpa_reference(q, k, v, causal, scale, window), ref)
        assert err <= 2 * sdpa_err + 1e-3, f"error {err:.2e} is more than twice SDPA's {sdpa_err:.2e}"
    if verbose:
        sdpa = f" (SDPA {result['sdpa_err']:.1e})" if "sdpa_err" in result else ""
        print(f"B={B} Hq={Hq} Hkv={Hkv} Nq={Nq} Nk={Nk} D={D} {str(dtype)[6:]:8s} causal={causal!s:5} "
              f"{layout:7s}: err {err:.1e}{sdpa}")
    return result


def varlen_error_bounds(q, k, v, cu_seqlens_q, cu_seqlens_k, causal=False, scale=None, window=None,
                        softcap=None):
    """error_bounds of packed sequences, sequence by sequence: o bound (total_q, Hq, D), lse bound (Hq, total_q)."""
    o_bound = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    lse_bound = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float64, device=q.device)
    cu_q, cu_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for q0, q1, k0, k1 in zip(cu_q, cu_q[1:], cu_k, cu_k[1:]):
        if q1 > q0 and k1 > k0:
            one = lambda x, a, b: x[a:b].transpose(0, 1)[None]              # (1, H, n, D)
            o_b, lse_b = error_bounds(one(q, q0, q1), one(k, k0, k1), one(v, k0, k1), causal, scale, window,
                                      softcap)
            o_bound[q0:q1] = o_b[0].transpose(0, 1)
            lse_bound[:, q0:q1] = lse_b[0]
    return o_bound, lse_bound


def check_varlen(fn, lengths_q, lengths_k, Hq=4, Hkv=2, D=32, dtype=torch.float16, causal=False, scale=None,
                 window=None, softcap=None, generator=None):
    """Run ``fn(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=, scale=, window=,
    softcap=) -> (o, lse)`` on fresh packed sequences and assert it matches the fp64 reference within the
    derived bounds, sequence by sequence (lse (Hq, total_q), -inf exactly where a row sees no key)."""
    q, k, v, cu_q, cu_k = random_varlen(lengths_q, lengths_k, Hq, Hkv, D, dtype, generator=generator)
    o, lse = fn(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal, scale=scale, window=window,
                softcap=softcap)
    assert o.dtype == q.dtype, f"output dtype {o.dtype}, input {q.dtype}"
    ref, ref_lse = varlen_reference(q, k, v, cu_q, cu_k, causal, scale, window, softcap)
    o_bound, lse_bound = varlen_error_bounds(q, k, v, cu_q, cu_k, causal, scale, window, softcap)
    return _check_output(o, lse, ref, ref_lse, o_bound, lse_bound)


def causal_boundary_cases(block_m, block_n):
    """(Nq, Nk) pairs where N_KV - N_Q takes every residue modulo block_n, with either sign, and N_Q every
    residue modulo block_m: every way a causal diagonal and a tail can cross the tiles."""
    tiles = max(block_m, block_n)
    cases = []
    for i in range(tiles):
        nq = block_m + 1 + (7 * i) % block_m              # 7 is odd: i -> 7i is a bijection modulo 2^k
        cases.append((nq, nq + block_n + i))               # N_KV - N_Q = block_n + i
        nk = block_n + 1 + (7 * i) % block_n
        cases.append((nk + block_n + i, nk))               # N_KV - N_Q = -(block_n + i): rows with no key
    return cases


def check_causal_boundaries(fn, block_m, block_n, D=16, dtype=torch.float16):
    """check_attention, causal, over every (Nq, Nk) of `causal_boundary_cases` (one batch, 2 query heads, 1 KV
    head). ``fn(q, k, v, causal, scale, case_index)``: the index lets a caller vary a launch option."""
    for i, (nq, nk) in enumerate(causal_boundary_cases(block_m, block_n)):
        check_attention(lambda q, k, v, causal, scale: fn(q, k, v, causal, scale, i),
                        1, 2, 1, nq, nk, D, dtype, causal=True)


MAX_INPUT_SETS = 64                   # a rotation never holds more input sets than this


def rotation_size(set_bytes):
    """How many independent input sets of `set_bytes` together exceed twice the L2 cache (1 on the CPU)."""
    if runtime.DEVICE != "cuda":
        return 1
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 * 2**20)
    return int(min(MAX_INPUT_SETS, 2 * l2 // max(1, set_bytes) + 1))


def _wallclock_median_ms(fn, warmup_ms, rep_ms):
    """Median wall-clock ms of fn on the CPU, where there is no GPU timer."""
    start = time.perf_counter()
    fn()
    estimate_ms = max((time.perf_counter() - start) * 1e3, 1e-3)
    for _ in range(max(1, round(warmup_ms / estimate_ms))):
        fn()
    times = []
    for _ in range(max(3, round(rep_ms / estimate_ms))):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def time_ms(fn, inputs=None, warmup_ms=25.0, rep_ms=100.0, cuda_graph=False):
    """Median ms per call of ``fn(*inputs[i])``, each call on the next input set (or ``fn()`` if no inputs).

    On a GPU: ``triton.testing.do_bench`` (it clears the L2 between calls; rotating input sets that exceed
    the L2 keeps a provider from reading its inputs from the cache), host time included, as a caller sees it.
    ``cuda_graph=True`` replays the calls from a CUDA graph (``do_bench_cudagraph``): GPU time only, for short
    calls where host time would hide the kernel's. On the CPU: wall-clock median."""
    if inputs is None:
        call = fn
    else:
        rotation = itertools.cycle(inputs)
        call = lambda: fn(*next(rotation))
    if runtime.DEVICE != "cuda":
        return _wallclock_median_ms(call, warmup_ms, rep_ms)
    if cuda_graph:                            # captures and replays on a side stream of its own
        return triton.testing.do_bench_cudagraph(call, rep=rep_ms, return_mode="median")
    return triton.testing.do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def attention_tflops(B, H, Nq, Nk, D, causal, ms):
    """FLOPs = 4·B·H·Nq·Nk·D (two matmuls), halved when causal (the FlashAttention papers' convention)."""
    flops = 4 * B * H * Nq * Nk * D * (0.5 if causal else 1.0)
    return flops / (ms * 1e-3) / 1e12


_MUTANT_IDS = itertools.count()


def mutant(module, edits, imports=None):
    """A fresh copy of `module` with its source edited: {old text: new text}, each old text found exactly once.

    ``imports={"fa2.chapters.kv_loop": other}`` also points the copy's ``from fa2.chapters.kv_loop import ...``
    line (found exactly once) at the module `other`, e.g. a mutant of the loop that a kernel calls. The copy is
    written to a temporary file and imported under a new name (registered in ``sys.modules``, so a later mutant
    can import it), so Triton sees new source and compiles its kernels afresh; the original module is
    untouched. Used to show what a bug does (chapter 4, the bug catalog of chapter 7)."""
    source = inspect.getsource(module)
    replacements = dict(edits)
    for name, other in (imports or {}).items():
        replacements[f"from {name} import "] = f"from {other.__name__} import "
    for old, new in replacements.items():
        count = source.count(old)
        if count != 1:
            raise ValueError(f"mutant: {old!r} occurs {count} times in {module.__name__}, expected once")
        source = source.replace(old, new)
    name = f"{module.__name__.rsplit('.', 1)[-1]}_mutant_{next(_MUTANT_IDS)}"
    path = Path(tempfile.mkdtemp(prefix="fa2_mutant_")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    copy = importlib.util.module_from_spec(spec)
    sys.modules[name] = copy
    spec.loader.exec_module(copy)
    return copy


__all__ = ["mutant", "time_ms", "rotation_size", "make_qkv", "sdpa_reference", "rel_err", "error_bounds",
           "check_attention", "varlen_error_bounds", "check_varlen", "causal_boundary_cases",
           "check_causal_boundaries", "attention_tflops", "LAYOUTS",
           "UNIT_ROUNDOFF", "FP32_ROUNDOFF", "SLACK"]
