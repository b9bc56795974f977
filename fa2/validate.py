"""Input checks for every public entry point: a bad call raises TypeError/ValueError naming the argument.

The kernels trust their arguments (a wrong stride or dtype computes garbage, it does not crash), so each
entry point checks everything once, before anything is cached or launched.
"""

import functools
import math
import numbers

import torch

from fa2 import runtime

MAX_HEAD_DIM = 256
DTYPES = (torch.float16, torch.bfloat16)


@functools.lru_cache(maxsize=None)
def capability(device_index):
    """(major, minor) compute capability of a CUDA device, memoised."""
    return torch.cuda.get_device_capability(device_index)


def check_tensor(who, name, t, ndim, layout, like=None):
    """t is a tensor of `ndim` dims (described by `layout`), fp16/bf16, non-empty, on `like`'s dtype/device."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{who}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{who}: {name} must be {ndim}-D {layout}, got shape {tuple(t.shape)}")
    if t.dtype not in DTYPES:
        raise TypeError(f"{who}: {name} must be float16 or bfloat16, got {t.dtype}")
    if t.numel() == 0:
        raise ValueError(f"{who}: {name} is empty, shape {tuple(t.shape)}")
    if like is not None:
        if t.dtype != like.dtype:
            raise TypeError(f"{who}: {name} is {t.dtype} but q is {like.dtype}; use one dtype")
        if t.device != like.device:
            raise ValueError(f"{who}: {name} is on {t.device} but q is on {like.device}")


def check_device(who, q):
    """The kernels need a CUDA device (or CPU tensors under the interpreter); bf16 needs sm_80+."""
    if q.device.type != "cuda" and not (runtime.INTERPRET and q.device.type == "cpu"):
        raise ValueError(f"{who}: q is on {q.device}; the kernels need a CUDA device "
                         "(or TRITON_INTERPRET=1 for CPU tensors)")
    if q.device.type == "cuda" and q.dtype == torch.bfloat16 and capability(q.device.index)[0] < 8:
        raise TypeError(f"{who}: bfloat16 needs an sm_80+ GPU (Ampere or newer); use float16 on this GPU")


def check_head_dim(who, d):
    if d > MAX_HEAD_DIM:
        raise ValueError(f"{who}: head dim {d} is not supported (at most {MAX_HEAD_DIM})")


def check_heads(who, hq, hkv):
    if hq % hkv:
        raise ValueError(f"{who}: q's {hq} heads are not a multiple of k's and v's {hkv} heads")


def check_no_grad(who, *tensors):
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise NotImplementedError(f"{who} is forward-only (no backward yet): call it under torch.no_grad() "
                                  "or torch.inference_mode(), or detach the inputs")


def check_scale(who, scale):
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, numbers.Real)
                              or not math.isfinite(scale)):
        raise TypeError(f"{who}: scale must be a finite number or None, got {scale!r}")


def check_flag(who, name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{who}: {name} must be a bool, got {type(value).__name__}")


def check_window(who, window):
    """window is None or (left, right): two ints >= -1 (flash-attn's window_size; -1: unbounded)."""
    if window is not None and (not isinstance(window, (tuple, list)) or len(window) != 2 or not all(
            isinstance(w, numbers.Integral) and not isinstance(w, bool) and w >= -1 for w in window)):
        raise ValueError(f"{who}: window must be None or (left, right), ints >= -1 (-1: unbounded), "
                         f"got {window!r}")


def check_softcap(who, softcap):
    """softcap is None or a finite number >= 0 (0: off)."""
    if softcap is not None and (isinstance(softcap, bool) or not isinstance(softcap, numbers.Real)
                                or not math.isfinite(softcap) or softcap < 0):
        raise TypeError(f"{who}: softcap must be None or a finite number >= 0 (0: off), got {softcap!r}")


def window_bounds(window):
    """(left, right) ints, (-1, -1) for None: the form the kernels and the custom ops take."""
    return (-1, -1) if window is None else (int(window[0]), int(window[1]))


def check_attention_inputs(q, k, v, causal, scale, who="fa2.attention"):
    """fa2.attention's contract: q (B, Hq, Nq, D), k and v (B, Hkv, Nk, D), Hq % Hkv == 0, D <= 256."""
    check_tensor(who, "q", q, 4, "(B, H, N, D)")
    check_tensor(who, "k", k, 4, "(B, H, N, D)", like=q)
    check_tensor(who, "v", v, 4, "(B, H, N, D)", like=q)
    check_device(who, q)
    (B, Hq, _, D), (Bk, Hkv, _, Dk) = q.shape, k.shape
    if Bk != B:
        raise ValueError(f"{who}: k has batch {Bk} but q has batch {B}")
    if Dk != D:
        raise ValueError(f"{who}: k has head dim {Dk} but q has head dim {D}")
    if v.shape != k.shape:
        raise ValueError(f"{who}: v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    check_heads(who, Hq, Hkv)
    check_head_dim(who, D)
    check_no_grad(who, q, k, v)
    check_flag(who, "causal", causal)
    check_scale(who, scale)


def softmax_scale(head_dim, scale):
    """The scale as a float: 1/sqrt(D) of the caller's head dim unless given."""
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
