"""The public API: `fa2.attention` -- input checks, kernel dispatch, and a torch custom op for torch.compile."""

import functools
import math
import numbers

import torch
import torch.nn.functional as F
import triton

from fa2 import runtime
from fa2.chapters.autotune import choose_config
from fa2.chapters.fast import attention_fast, tma_compatible
from fa2.chapters.forward import attention_forward
from fa2.plan import FastPlan, signature

MAX_HEAD_DIM = 256


def _check_inputs(q, k, v, causal, scale):
    """Raise TypeError/ValueError naming the argument for anything the kernels cannot compute correctly."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"fa2.attention: {name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 4:
            raise ValueError(f"fa2.attention: {name} must be 4-D (B, H, N, D), got shape {tuple(t.shape)}")
        if t.dtype not in (torch.float16, torch.bfloat16):
            raise TypeError(f"fa2.attention: {name} must be float16 or bfloat16, got {t.dtype}")
        if t.dtype != q.dtype:
            raise TypeError(f"fa2.attention: {name} is {t.dtype} but q is {q.dtype}; use one dtype")
        if t.device != q.device:
            raise ValueError(f"fa2.attention: {name} is on {t.device} but q is on {q.device}")
        if t.numel() == 0:
            raise ValueError(f"fa2.attention: {name} is empty, shape {tuple(t.shape)}")
    if q.device.type != "cuda" and not (runtime.INTERPRET and q.device.type == "cpu"):
        raise ValueError(f"fa2.attention: q is on {q.device}; the kernels need a CUDA device "
                         "(or TRITON_INTERPRET=1 for CPU tensors)")
    (B, Hq, _, D), (Bk, Hkv, Nk, Dk) = q.shape, k.shape
    if Bk != B:
        raise ValueError(f"fa2.attention: k has batch {Bk} but q has batch {B}")
    if Dk != D:
        raise ValueError(f"fa2.attention: k has head dim {Dk} but q has head dim {D}")
    if v.shape != k.shape:
        raise ValueError(f"fa2.attention: v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    if Hq % Hkv:
        raise ValueError(f"fa2.attention: q's {Hq} heads are not a multiple of k's and v's {Hkv} heads")
    if D > MAX_HEAD_DIM:
        raise ValueError(f"fa2.attention: head dim {D} is not supported (at most {MAX_HEAD_DIM})")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise NotImplementedError("fa2.attention is forward-only (no backward yet): call it under torch.no_grad() "
                                  "or torch.inference_mode(), or detach q, k and v")
    if not isinstance(causal, bool):
        raise TypeError(f"fa2.attention: causal must be a bool, got {type(causal).__name__}")
    if scale is not None and (not isinstance(scale, numbers.Real) or not math.isfinite(scale)):
        raise TypeError(f"fa2.attention: scale must be a finite number or None, got {scale!r}")
    if q.device.type == "cuda" and q.dtype == torch.bfloat16 and _capability(q.device.index)[0] < 8:
        raise TypeError("fa2.attention: bfloat16 needs an sm_80+ GPU (Ampere or newer); use float16 on this GPU")


def _softmax_scale(q, scale):
    """The scale as a float: 1/sqrt(D) of the caller's (unpadded) head dim unless given."""
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def padded_head_dim(d):
    """Head dims are powers of two >= 16 inside the kernels (tl.arange, tl.dot); others are zero-padded."""
    return max(16, 1 << (d - 1).bit_length())


@functools.lru_cache(maxsize=None)
def _capability(device_index):
    return torch.cuda.get_device_capability(device_index)


def _kernel_for(q, k, v):
    """The Hopper kernel (TMA, exp2, split loops) where it can run, the chapter-5 kernel elsewhere."""
    if q.device.type == "cuda":
        return "fast" if _capability(q.device.index)[0] >= 9 and tma_compatible(q, k, v) else "generic"
    return "generic"  # the interpreter runs both; tests call fa2.chapters.fast directly


def _config(kernel, q, k, v, causal, scale):
    """Shipped/cached config for these inputs, or autotune once (each candidate checked against chapter 5)."""
    if kernel == "fast":
        run = lambda cfg: attention_fast(q, k, v, causal, scale, config=cfg, host_desc=True)
    else:
        run = lambda cfg: attention_forward(q, k, v, causal, scale, **cfg)
    output = lambda cfg: run(cfg)[0]                                  # what autotune checks and times
    reference = lambda: attention_forward(q, k, v, causal, scale)[0]   # chapter 5's kernel, default config
    return choose_config(kernel, q, k, v, causal, scale, output, reference)


def _forward(q, k, v, causal, scale):
    """(o, lse) with o laid out like torch.empty_like(q) -- what the custom op's fake promises."""
    q_in = q
    D = q.shape[-1]
    D_pad = padded_head_dim(D)
    if D_pad != D:  # zero columns add 0 to every score and produce 0 output columns: exact
        q, k, v = (F.pad(t, (0, D_pad - D)) for t in (q, k, v))
    kernel = _kernel_for(q, k, v)
    cfg = _config(kernel, q, k, v, causal, scale)
    if kernel == "fast":
        o, lse = attention_fast(q, k, v, causal, scale, config=cfg, host_desc=True)
    else:
        o, lse = attention_forward(q, k, v, causal, scale, **cfg)
    if D_pad != D:
        o = torch.empty_like(q_in).copy_(o[..., :D])
    return o, lse


# Fewer programs than this many waves over the SMs: the shipped config (tuned per length, whatever B*H) leaves
# SMs idle, and a 64-row tile that makes more programs wins. Measured on the H200, GPU time only (CUDA graph):
# (1,16,512,64) causal 11.0 -> 7.2 us, (1,32,512,128) causal 14.6 -> 12.0 us, (8,16,512,64) causal 26.3 -> 22.7 us
# (`.ci/gpu/overhead.py`, book/results/small_configs.csv); shapes with more programs keep the table's choice.
SMALL_GRID_WAVES = 4
SMALL_GRID_CONFIGS = {  # head dim -> config (both are candidates the tuner checked and shipped for other keys)
    64: dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2),
    128: dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3),
}


@functools.lru_cache(maxsize=None)
def _sm_count(device_index):
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _fill_the_gpu(cfg, q):
    """The small-grid config when the table's leaves most SMs idle (see SMALL_GRID_WAVES)."""
    B, H, N_Q, D = q.shape
    programs = B * H * triton.cdiv(N_Q, cfg["BLOCK_M"])
    if D in SMALL_GRID_CONFIGS and programs < SMALL_GRID_WAVES * _sm_count(q.device.index):
        return dict(cfg, **SMALL_GRID_CONFIGS[D])
    return cfg


def _plan(q, k, v, causal, scale):
    """A callable (q, k, v) -> (o, lse) for every later call with this signature (see fa2/plan.py)."""
    D = q.shape[-1]
    if D == padded_head_dim(D) and _kernel_for(q, k, v) == "fast":
        cfg = _fill_the_gpu(_config("fast", q, k, v, causal, scale), q)
        return FastPlan(q, k, v, causal, scale, cfg, host_desc=True)
    return functools.partial(_forward, causal=causal, scale=scale)


_PLANS = {}
MAX_PLANS = 4096


def _new_plan(q, k, v, causal, scale):
    _check_inputs(q, k, v, causal, scale)                # raises, naming the argument, before anything is cached
    key = signature(q, k, v, causal, scale)
    plan = _plan(q, k, v, causal, _softmax_scale(q, scale))
    if len(_PLANS) >= MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = plan
    return plan


@torch.library.custom_op("fa2::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(q, k, v, causal, scale)


@_attention_op.register_fake
def _(q, k, v, causal, scale):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def attention(q, k, v, causal=False, scale=None, return_lse=False):
    """Attention softmax(q k^T * scale) v, FlashAttention-2 forward; q (B,Hq,Nq,D), k/v (B,Hkv,Nk,D)."""
    if torch.compiler.is_compiling():                    # torch.compile sees the custom op
        _check_inputs(q, k, v, causal, scale)
        o, lse = _attention_op(q, k, v, causal, _softmax_scale(q, scale))
    else:                                                # eager: the plan of this input signature
        try:
            plan = _PLANS[signature(q, k, v, causal, scale)]
        except (KeyError, AttributeError, TypeError):    # new signature, or not tensors / unhashable flags
            plan = _new_plan(q, k, v, causal, scale)
        o, lse = plan(q, k, v)
    return (o, lse) if return_lse else o
