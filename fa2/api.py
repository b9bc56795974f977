"""The public API: `fa2.attention`, and the torch custom op that `torch.compile` sees.

Both paths run the plan `fa2.plan.plan_for` returns for the call's signature: the same kernel and config.
"""

import torch

from fa2.plan import plan_for
from fa2.validate import check_attention_inputs, softmax_scale


@torch.library.custom_op("fa2::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                  scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    return plan_for(q, k, v, causal, scale)(q, k, v)


@_attention_op.register_fake
def _(q, k, v, causal, scale):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def attention(q, k, v, causal=False, scale=None, return_lse=False):
    """Attention softmax(q k^T * scale) v, FlashAttention-2 forward; q (B,Hq,Nq,D), k/v (B,Hkv,Nk,D)."""
    if torch.compiler.is_compiling():                    # torch.compile sees the custom op
        check_attention_inputs(q, k, v, causal, scale)
        o, lse = _attention_op(q, k, v, causal, softmax_scale(q.shape[-1], scale))
    else:                                                # eager: the plan, without the dispatcher
        o, lse = plan_for(q, k, v, causal, scale)(q, k, v)
    return (o, lse) if return_lse else o
