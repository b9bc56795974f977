"""FlashAttention-2 forward in Triton, exported from the chapters of the book.

    o = fa2.attention(q, k, v, causal=False, scale=None)           # q (B, Hq, Nq, D); k, v (B, Hkv, Nk, D)
    o, lse = fa2.attention(q, k, v, causal=True, return_lse=True)   # lse (B, Hq, Nq) fp32, natural log
    o = fa2.attention(q, k, v, causal=True, window=(4096, 0), softcap=50.0)   # sliding window, Gemma 2 softcap
    o = fa2.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=True)
                                                                    # packed q (total_q, Hq, D), k, v (total_k, Hkv, D)
    o = fa2.decode(q, k_cache, v_cache, cache_seqlens)              # q (B, Hq, Nq<=16, D): Flash-Decoding
    from fa2 import flash_attn_func                                 # flash-attn 2.x's signatures, (B, N, H, D)
    fa2.integrations.transformers.register()                        # attn_implementation="fa2" in HF models
"""

from . import runtime  # noqa: F401  (first: picks GPU or the Triton interpreter before triton loads)
from ._version import __version__  # fa2/_version.py: the one place the version is written
from .api import attention
from .decoding import decode
from .varlen import attention_varlen
from .flash_attn import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache
from . import integrations  # noqa: F401  (imports no integration's library until one is used)

__all__ = ["attention", "attention_varlen", "decode", "flash_attn_func", "flash_attn_varlen_func",
           "flash_attn_with_kvcache", "integrations"]
