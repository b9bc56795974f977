"""Hugging Face transformers: `attn_implementation="fa2"` runs a model's attention on fa2's kernels.

    import fa2.integrations.transformers
    fa2.integrations.transformers.register()                  # once, before loading the model
    model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="fa2", dtype=torch.bfloat16)

`register()` adds two entries under one name: the attention function to transformers' `AttentionInterface`, and
the mask function to its `AttentionMaskInterface` -- without the second, transformers (4.53 on) builds no
mask at all for a name it does not know, and padded batches would attend to their padding. The mask function gives
what flash-attn's integration gets: the 2-D padding mask (batch, kv_length), True where a token is real, or None
when nothing is padded. The attention function then takes one of three paths:

- no padding: `fa2.attention` on the (B, H, N, D) tensors as they are (GQA without copies, bottom-right causal);
- padding: the real tokens are gathered into packed (total, H, D) tensors, `fa2.attention_varlen` runs, and the
  output is scattered back with zeros at the padded positions (left padding for the queries, as transformers pads
  for generation);
- one row of several sequences packed together (padding-free batches: position_ids restarting, no mask): varlen
  over the sequences that position_ids mark.

Sliding-window layers pass `sliding_window` (the window's total size w, as transformers counts it: w - 1 keys before
the query and the query), Gemma-2-style models pass `softcap`; both go to the kernels. What fa2 does not compute --
dropout in training mode, attention sinks (`s_aux`), 4-D custom masks, mask patterns added with or/and mask functions
(e.g. bidirectional image tokens) -- raises NotImplementedError naming it. fa2 computes in float16/bfloat16: a
float32 model runs under `torch.autocast` (inputs cast to its dtype) or raises TypeError.

Supported transformers: 4.57 to 5.x, the versions whose `masking_utils.AttentionMaskInterface` calls mask functions by
keyword (tests/test_transformers.py passed on 4.57.6, 5.0.0 and 5.24.0; CI installs `transformers>=4.57,<5.25`, requirements-test.txt).
"""

import torch

try:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
except ImportError as e:                               # not installed, or older than the mask interface
    raise ImportError("fa2.integrations.transformers needs transformers >= 4.57: pip install 'fa2-triton[transformers]'"
                      ) from e

import fa2

NAME = "fa2"


def register(name=NAME):
    """Register fa2 with transformers under `name`: then `attn_implementation=name` selects it."""
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, padding_mask)


def padding_mask(batch_size=None, kv_length=None, attention_mask=None, **kwargs):
    """transformers' mask function for fa2: the 2-D padding mask (batch, kv_length) bool, or None without padding."""
    if kwargs.get("use_vmap"):             # transformers' sign that or/and mask functions reshape the pattern
        raise NotImplementedError(f"{NAME}: this model adds a mask pattern (or_mask_function/and_mask_function) to "
                                  "causal/sliding-window attention; fa2 computes only those and padding")
    if attention_mask is None:
        return None
    attention_mask = attention_mask[:, -kv_length:].bool()    # a sliding-window layer keeps the last keys only
    if attention_mask.shape[1] == kv_length and bool(attention_mask.all()):
        return None
    return attention_mask


def _compute_dtype(query):
    """float16/bfloat16 as given; float32 under autocast becomes the autocast dtype; anything else raises."""
    if query.dtype in (torch.float16, torch.bfloat16):
        return query.dtype
    if query.dtype == torch.float32 and torch.is_autocast_enabled(query.device.type):
        return torch.get_autocast_dtype(query.device.type)
    raise TypeError(f"{NAME}: attention inputs are {query.dtype}; fa2 computes in float16 or bfloat16: load the model "
                    "with dtype=torch.bfloat16 (or float16), or run it under torch.autocast")


def _unpad(mask):
    """Real-token indices into the flattened (B*N) rows, cu_seqlens (B + 1,) int32, and the longest length."""
    lengths = mask.sum(dim=-1, dtype=torch.int32)
    indices = mask.flatten().nonzero().flatten()
    cu_seqlens = torch.nn.functional.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
    return indices, cu_seqlens, int(lengths.max())


def _packed_starts(position_ids, batch, n_q, n_k):
    """cu_seqlens of the sequences packed in one row (position_ids restart at their minimum), or None."""
    if position_ids is None or batch != 1 or n_q != n_k or n_q == 1:
        return None
    positions = position_ids.reshape(-1)
    if positions.shape[0] != n_q:
        return None
    if not bool((positions - positions.min() != torch.arange(n_q, device=positions.device)).any()):
        return None                                          # one sequence
    starts = (positions == positions.min()).nonzero().flatten().to(torch.int32)
    return torch.cat([starts, starts.new_tensor([n_q])])


def _varlen(query, key, value, indices_q, cu_q, max_q, indices_k, cu_k, max_k, **options):
    """Gather the listed rows of (B, H, N, D) q/k/v into packed tensors, attend, scatter back to (B, Nq, Hq, D)."""
    B, H_Q, N_Q, D = query.shape
    packed = lambda t, idx: t.transpose(1, 2).reshape(-1, t.shape[1], D).index_select(0, idx)   # (total, H, D)
    o = fa2.attention_varlen(packed(query, indices_q), packed(key, indices_k), packed(value, indices_k),
                             cu_q, cu_k, max_q, max_k, **options)
    out = o.new_zeros(B * N_Q, H_Q, D)                       # padded queries: 0, as flash-attn's integration
    out.index_copy_(0, indices_q, o)
    return out.view(B, N_Q, H_Q, D)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, sliding_window=None,
                      softcap=None, is_causal=None, **kwargs):
    """transformers' attention function: query (B, Hq, Nq, D), key/value (B, Hkv, Nk, D), the padding mask from
    `padding_mask` -> ((B, Nq, Hq, D) output, None)."""
    if dropout:
        raise NotImplementedError(f"{NAME}: dropout={dropout!r} (training mode?) is not supported: fa2 is "
                                  "forward-only and has no dropout; call model.eval()")
    if kwargs.get("s_aux") is not None:
        raise NotImplementedError(f"{NAME}: s_aux (attention sinks) is not supported")
    if attention_mask is not None and attention_mask.dim() != 2:
        raise NotImplementedError(f"{NAME}: attention_mask of shape {tuple(attention_mask.shape)} is not supported: "
                                  "fa2 takes the 2-D padding mask (register() installs the mask function that "
                                  "makes it; a custom 4-D mask needs another attn_implementation)")
    in_dtype, dtype = query.dtype, _compute_dtype(query)
    query, key, value = (t.to(dtype) for t in (query, key, value))
    causal = bool(getattr(module, "is_causal", True) if is_causal is None else is_causal)
    window = None if sliding_window is None else (sliding_window - 1, sliding_window - 1)   # w keys, query included
    options = dict(causal=causal, scale=scaling, window=window, softcap=float(softcap) if softcap else None)
    B, _, N_Q, _ = query.shape

    if attention_mask is not None:
        mask = attention_mask.to(device=query.device, dtype=torch.bool)
        key, value = key[:, :, :mask.shape[1]], value[:, :, :mask.shape[1]]   # a static cache's unused tail
        indices_k, cu_k, max_k = _unpad(mask)
        if N_Q == key.shape[2]:
            indices_q, cu_q, max_q = indices_k, cu_k, max_k
        else:                                   # the queries are the last N_Q tokens (left padding)
            indices_q, cu_q, max_q = _unpad(mask[:, -N_Q:])
        out = _varlen(query, key, value, indices_q, cu_q, max_q, indices_k, cu_k, max_k, **options)
        return out.to(in_dtype), None

    cu_seqlens = _packed_starts(kwargs.get("position_ids"), B, N_Q, key.shape[2])
    if cu_seqlens is not None:
        rows = torch.arange(N_Q, device=query.device)
        longest = int(cu_seqlens.diff().max())
        out = _varlen(query, key, value, rows, cu_seqlens, longest, rows, cu_seqlens, longest, **options)
        return out.to(in_dtype), None

    o = fa2.attention(query, key, value, **options)              # (B, Hq, Nq, D)
    return o.transpose(1, 2).contiguous().to(in_dtype), None
