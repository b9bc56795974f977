"""FlashAttention-2 forward in Triton, exported from the chapters of the book.

    o = fa2.attention(q, k, v, causal=False, scale=None)           # q (B, Hq, Nq, D); k, v (B, Hkv, Nk, D)
    o, lse = fa2.attention(q, k, v, causal=True, return_lse=True)   # lse (B, Hq, Nq) fp32, natural log
    o = fa2.decode(q, k_cache, v_cache, cache_seqlens)              # q (B, Hq, Nq<=16, D): Flash-Decoding
"""

from . import runtime  # noqa: F401  (first: picks GPU or the Triton interpreter before triton loads)
from ._version import __version__  # fa2/_version.py: the one place the version is written
from .api import attention
from .decoding import decode

__all__ = ["attention", "decode"]
