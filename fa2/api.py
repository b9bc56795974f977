"""The public API: `fa2.attention`, and the torch custom op that `torch.compile` sees.

Without a window or a softcap both paths run the plan `fa2.plan.plan_for` returns for the call's signature: the
same kernel and config. With either, both run chapter 10's kernel (`fa2.varlen.attention_masked`), or on sm_90
the Gluon kernel where its table measured it faster for the call's window (`fa2.plan.window_plan_for`).
"""

import torch

from fa2 import validate
from fa2.plan import plan_for, window_plan_for
from fa2.validate import check_attention_inputs, softmax_scale
from fa2.varlen import attention_masked


def _masked(window_left, window_right, softcap):
    """Does a call need a masked kernel: a bounded window side, or a softcap?"""
    return window_left >= 0 or window_right >= 0 or softcap > 0


def _attention_masked(q, k, v, causal, scale, window_left, window_right, softcap):
    """A windowed or softcapped call: the Gluon kernel where the shipped table measured it faster for such a
    window (`fa2.plan.window_plan_for`, sm_90), else chapter 10's kernel."""
    plan = window_plan_for(q, k, v, causal, scale, window_left, window_right, softcap)
    if plan is not None:
        return plan(q, k, v)
    return attention_masked(q, k, v, causal, scale, window_left, window_right, softcap)


@torch.library.custom_op("fa2::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
                  window_left: int = -1, window_right: int = -1,
                  softcap: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    if _masked(window_left, window_right, softcap):
        return _attention_masked(q, k, v, causal, scale, window_left, window_right, softcap)
    return plan_for(q, k, v, causal, scale)(q, k, v)


@_attention_op.register_fake
def _(q, k, v, causal, scale, window_left=-1, window_right=-1, softcap=0.0):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def attention(q, k, v, causal=False, scale=None, return_lse=False, window=None, softcap=None):
    """Attention softmax(q k^T * scale) v, FlashAttention-2 forward; q (B,Hq,Nq,D), k/v (B,Hkv,Nk,D).

    window=(left, right) (flash-attn's window_size, -1: unbounded) and softcap (scores -> c·tanh(s/c)) as in
    `fa2.attention_varlen`."""
    if window is None and softcap is None:               # the fast path: nothing else is looked at
        if torch.compiler.is_compiling():                # torch.compile sees the custom op
            check_attention_inputs(q, k, v, causal, scale)
            o, lse = _attention_op(q, k, v, causal, softmax_scale(q.shape[-1], scale))
        else:                                            # eager: the plan, without the dispatcher
            o, lse = plan_for(q, k, v, causal, scale)(q, k, v)
        return (o, lse) if return_lse else o
    check_attention_inputs(q, k, v, causal, scale)
    validate.check_window("fa2.attention", window)
    validate.check_softcap("fa2.attention", softcap)
    args = (q, k, v, causal, softmax_scale(q.shape[-1], scale), *validate.window_bounds(window),
            float(softcap or 0.0))
    if torch.compiler.is_compiling():
        o, lse = _attention_op(*args)
    elif _masked(*args[5:]):
        o, lse = _attention_masked(*args)
    else:                                                # window (-1, -1), softcap 0: plain attention
        o, lse = plan_for(q, k, v, causal, scale)(q, k, v)
    return (o, lse) if return_lse else o
