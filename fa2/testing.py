"""The project's one measuring harness: checks against fp64 and SDPA, one error metric, one timer.

    check_attention(my_attention, B=2, Hq=4, Hkv=2, Nq=37, Nk=70, D=32, dtype=torch.bfloat16, causal=True)

draws new inputs, runs ``my_attention(q, k, v, causal=..., scale=...) -> o`` (or ``(o, lse)``) and asserts that
the output is finite, close to the fp64 reference (atol = rtol = 1e-2), and no more than twice as far from it
as SDPA is on the same inputs.

    ms = time_ms(fn, inputs=[(q, k, v), ...])               # median ms per call, input sets rotated past L2

``rel_err`` (max |x - ref| / max |ref|) is the error every check, the autotuner and the benchmark report.
Everything that times a kernel -- chapters, autotune, ``python -m fa2.bench``, the GPU scripts -- calls
``time_ms``.
"""


import importlib.util
import inspect
import itertools
import statistics
import tempfile
import time
from pathlib import Path

import triton
import triton.testing

import torch
import torch.nn.functional as F

from . import runtime
from .chapters.reference import attention_reference, visible_keys

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


def sdpa_reference(q, k, v, causal=False, scale=None):
    """SDPA with the package's conventions (bottom-right causal, GQA); rows with no visible key give 0."""
    Nq, Nk = q.shape[2], k.shape[2]
    mask = visible_keys(Nq, Nk, causal, q.device)
    rows_seen = mask.any(-1)
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask if causal else None, scale=scale,
                                       enable_gqa=q.shape[1] != k.shape[1])
    return torch.where(rows_seen[:, None], o, torch.zeros((), dtype=o.dtype, device=o.device))


def rel_err(x, ref):
    """max |x - ref| over max |ref| (NaN if x has a NaN): one number per comparison."""
    x, ref = x.double(), ref.double()
    return ((x - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()


def check_attention(fn, B=2, Hq=4, Hkv=None, Nq=64, Nk=None, D=32, dtype=torch.float16, causal=False,
                    layout="bhnd", scale=None, atol=1e-2, rtol=1e-2, check_lse=True, verbose=False):
    """Run fn on fresh inputs and assert it matches the fp64 reference as well as SDPA does. Returns errors."""
    Hkv = Hq if Hkv is None else Hkv
    Nk = Nq if Nk is None else Nk
    q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype, layout)
    out = fn(q, k, v, causal=causal, scale=scale)
    o, lse = out if isinstance(out, tuple) else (out, None)
    ref, ref_lse = attention_reference(q, k, v, causal, scale, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype, f"output {tuple(o.shape)} {o.dtype}"
    assert torch.isfinite(o).all(), "output has NaN/inf (unwritten rows or a 0/0)"
    err = rel_err(o, ref)
    # SDPA computes with q, k, v upcast on the CPU when the GPU has no kernel for the combination
    sdpa_o = sdpa_reference(q, k, v, causal, scale)
    sdpa_err = rel_err(sdpa_o, ref)
    torch.testing.assert_close(o.double(), ref.to(o.device), atol=atol, rtol=rtol)
    assert err <= 2 * sdpa_err + 1e-3, f"error {err:.2e} is more than twice SDPA's {sdpa_err:.2e}"
    result = {"err": err, "sdpa_err": sdpa_err}
    if lse is not None and check_lse:
        assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
        seen = torch.isfinite(ref_lse)
        assert torch.isneginf(lse[~seen]).all(), "rows with no visible key must have lse = -inf"
        torch.testing.assert_close(lse[seen].double(), ref_lse[seen].to(lse.device), atol=1e-2, rtol=1e-3)
        result["lse_err"] = (lse[seen].double() - ref_lse[seen]).abs().max().item() if seen.any() else 0.0
    if verbose:
        print(f"B={B} Hq={Hq} Hkv={Hkv} Nq={Nq} Nk={Nk} D={D} {str(dtype)[6:]:8s} causal={causal!s:5} "
              f"{layout:7s}: err {err:.1e} (SDPA {sdpa_err:.1e})")
    return result


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


def mutant(module, edits):
    """A fresh copy of `module` with its source edited: {old text: new text}, each old text found exactly once.

    The copy is written to a temporary file and imported under a new name, so Triton sees new source and
    compiles its kernels afresh; the original module is untouched. Used to show what a bug does (chapter 4,
    the bug catalog of chapter 7)."""
    source = inspect.getsource(module)
    for old, new in edits.items():
        count = source.count(old)
        if count != 1:
            raise ValueError(f"mutant: {old!r} occurs {count} times in {module.__name__}, expected once")
        source = source.replace(old, new)
    name = f"{module.__name__.rsplit('.', 1)[-1]}_mutant_{next(_MUTANT_IDS)}"
    path = Path(tempfile.mkdtemp(prefix="fa2_mutant_")) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return copy


__all__ = ["mutant", "time_ms", "rotation_size", "make_qkv", "sdpa_reference", "rel_err", "check_attention", "attention_tflops", "LAYOUTS"]
