"""Chapter 6's optimisation ladder as versions that all stay runnable: v0 (chapter 5) ... v5 (`fa2.attention`'s
launch plan with chapter 12's Gluon dispatch off: chapter 6's kernel as the package runs it).

Each version is (q, k, v, causal) -> (o, lse). Chapter 6 times them side by side, `tests/test_gpu.py` checks
every one over the reference sweep, and `python -m fa2.bench --providers fa2@v3,fa2` benchmarks any of them.
"""

from dataclasses import dataclass
from typing import Callable

from fa2.chapters.fast import attention_fast
from fa2.chapters.forward import attention_forward
from fa2.plan import chapter6_attention

# v1: the config chapter 6's tuner chose for the chapter-5 kernel at (8, 32, 2048, 128) bf16 causal on the H200
# (book/results/ladder.csv); v2-v4: chapter 6's default Hopper config, so each rung changes one thing.
TUNED_GENERIC = dict(block_m=64, block_n=64, num_warps=4, num_stages=3)
HOPPER_DEFAULT = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2)


@dataclass(frozen=True)
class Version:
    """One rung: its name (v0...v5), what it adds over the rung below, and how to run it."""
    name: str
    adds: str
    run: Callable


def _fast(split, reverse):
    return lambda q, k, v, causal: attention_fast(q, k, v, causal, config=HOPPER_DEFAULT, split=split,
                                                  reverse=reverse)


VERSIONS = {v.name: v for v in [
    Version("v0", "chapter 5 (64x64 tiles, 4 warps, 2 stages)", lambda q, k, v, causal: attention_forward(q, k, v, causal)),
    Version("v1", "tuned config", lambda q, k, v, causal: attention_forward(q, k, v, causal, **TUNED_GENERIC)),
    Version("v2", "exp2 + TMA (device descriptors), one loop", _fast(split=False, reverse=False)),
    Version("v3", "loop split: mask-free and diagonal tiles", _fast(split=True, reverse=False)),
    Version("v4", "longest query tiles first", _fast(split=True, reverse=True)),
    Version("v5", "host descriptors, tuned config, launch plan", chapter6_attention),
]}


def version(name):
    """The version called `name` (v0...v5); ValueError naming the choices otherwise."""
    try:
        return VERSIONS[name]
    except KeyError:
        raise ValueError(f"unknown ladder version {name!r}; choose from {', '.join(VERSIONS)}") from None
