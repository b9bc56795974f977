"""`fa2.attention_varlen` and the windowed / softcapped path of `fa2.attention`: checks, configs, custom ops.

    o = fa2.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=True)
    o, lse = fa2.attention(q, k, v, causal=True, window=(4096, 0), softcap=50.0, return_lse=True)

Both run chapter 10's kernel (`fa2/chapters/varlen.py`): packed q (total_q, Hq, D), k and v (total_k, Hkv, D)
with int32 `cu_seqlens` (B + 1,) read on the device, or (B, H, N, D) tensors with one length for every row.
The host never reads `cu_seqlens`: no synchronisation, and a call can be captured in a CUDA graph. So their
values are trusted, as in flash-attn: cu_seqlens[0] = 0, non-decreasing, the last entry the packed length, and
no sequence longer than its max_seqlen (longer rows would be left unwritten).

Semantics are flash-attn's. Query i of a sequence with n_q queries and n_k keys sits at position
i + n_k - n_q (bottom-right) and sees key j iff pos - left <= j <= pos + right, where window = (left, right) and
-1 leaves a side unbounded; causal sets right = 0. `softcap` c > 0 maps scores s (after the scale) to
c·tanh(s / c) before the softmax; 0 or None is off. Rows that see no key give o = 0 and lse = -inf.
"""

import torch

from fa2 import validate
from fa2.chapters.varlen import attention_varlen_forward, attention_window_forward
from fa2.varlen_configs import launch_config

WHO = "fa2.attention_varlen"

# The launch config on a GPU comes from the kernel's own table (fa2/varlen_configs.py: fa2/configs/<GPU>.varlen.json,
# written by `python -m fa2.tune --kernel varlen`), else the fixed config it was measured with before it had one.
# It never borrows chapter 6's table: on the H200 the varlen sweep ran 2.112 ms with its own table's config (128 x 64
# tiles, 2 stages) and 2.336 ms with the prefill table's config for the same length bucket (64 x 64, 3 stages).


def _check_int(name, value, who):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"{who}: {name} must be an int >= 0, got {value!r}")


def _check_cu_seqlens(name, t, q, who):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{who}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.int32:
        raise TypeError(f"{who}: {name} must be int32, got {t.dtype}")
    if t.dim() != 1 or t.shape[0] < 2:
        raise ValueError(f"{who}: {name} must be 1-D (batch + 1,) with at least 2 entries, got shape "
                         f"{tuple(t.shape)}")
    if t.device != q.device:
        raise ValueError(f"{who}: {name} is on {t.device} but q is on {q.device}")


def check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale,
                        window, softcap, who=WHO):
    """attention_varlen's contract: packed q (total_q, Hq, D), k and v (total_k, Hkv, D) with unit last
    stride, int32 cu_seqlens (B + 1,) on q's device, int max_seqlens, flags as fa2.attention's."""
    validate.check_tensor(who, "q", q, 3, "(total_q, H, D)")
    validate.check_tensor(who, "k", k, 3, "(total_k, H, D)", like=q)
    validate.check_tensor(who, "v", v, 3, "(total_k, H, D)", like=q)
    validate.check_device(who, q)
    (_, Hq, D), (_, Hkv, Dk) = q.shape, k.shape
    if Dk != D:
        raise ValueError(f"{who}: k has head dim {Dk} but q has head dim {D}")
    if v.shape != k.shape:
        raise ValueError(f"{who}: v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.stride(-1) != 1:
            raise ValueError(f"{who}: {name} must have a contiguous last dim (stride 1), got strides "
                             f"{t.stride()}")
    validate.check_heads(who, Hq, Hkv)
    validate.check_head_dim(who, D)
    _check_cu_seqlens("cu_seqlens_q", cu_seqlens_q, q, who)
    _check_cu_seqlens("cu_seqlens_k", cu_seqlens_k, q, who)
    if cu_seqlens_k.shape != cu_seqlens_q.shape:
        raise ValueError(f"{who}: cu_seqlens_k has shape {tuple(cu_seqlens_k.shape)} but cu_seqlens_q has "
                         f"{tuple(cu_seqlens_q.shape)}; both are (batch + 1,)")
    _check_int("max_seqlen_q", max_seqlen_q, who)
    _check_int("max_seqlen_k", max_seqlen_k, who)
    validate.check_no_grad(who, q, k, v)
    validate.check_flag(who, "causal", causal)
    validate.check_scale(who, scale)
    validate.check_window(who, window)
    validate.check_softcap(who, softcap)


def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, left, right,
            softcap):
    window = None if left < 0 and right < 0 else (left, right)
    config = launch_config(q, max_seqlen_q, max_seqlen_k, causal, window)
    return attention_varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                                    scale, window, softcap or None, config)


@torch.library.custom_op("fa2::attention_varlen", mutates_args=())
def _attention_varlen_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens_q: torch.Tensor,
                         cu_seqlens_k: torch.Tensor, max_seqlen_q: int, max_seqlen_k: int, causal: bool,
                         scale: float, window_left: int, window_right: int,
                         softcap: float) -> tuple[torch.Tensor, torch.Tensor]:
    return _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, window_left,
                   window_right, softcap)


@_attention_varlen_op.register_fake
def _(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, window_left,
      window_right, softcap):
    return torch.empty_like(q), q.new_empty((q.shape[1], q.shape[0]), dtype=torch.float32)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, scale=None,
                     window=None, softcap=None, return_lse=False):
    """Attention over packed sequences: q (total_q, Hq, D), k/v (total_k, Hkv, D) -> o (total_q, Hq, D), and
    lse (Hq, total_q) fp32 if return_lse; sequence b is rows cu_seqlens[b]:cu_seqlens[b + 1]."""
    check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, window,
                        softcap)
    args = (q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
            validate.softmax_scale(q.shape[-1], scale), *validate.window_bounds(window), float(softcap or 0.0))
    if torch.compiler.is_compiling():                 # torch.compile sees the custom op
        o, lse = _attention_varlen_op(*args)
    else:
        o, lse = _varlen(*args)
    return (o, lse) if return_lse else o


def attention_masked(q, k, v, causal, scale, left, right, softcap):
    """(o, lse) of (B, H, N, D) attention with a window (left, right; -1 unbounded) and/or a softcap (0: off),
    inputs checked already. A last dim with a stride other than 1 is copied (the kernel's rows are contiguous)."""
    q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
    window = None if left < 0 and right < 0 else (left, right)
    config = launch_config(q, q.shape[2], k.shape[2], causal, window)
    return attention_window_forward(q, k, v, causal, scale, window, softcap or None, config)
