"""FlashAttention-2 forward and Flash-Decoding in Triton, exported from the chapters of the book."""

from . import runtime  # noqa: F401  (first: picks GPU or the Triton interpreter before triton loads)

__version__ = "0.1.0"
