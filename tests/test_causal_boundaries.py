"""Causal attention at every offset of the diagonal against the tiles, and every query tail, for both kernels.

A mistake that moves a loop boundary by one key row changes the result only when the diagonal crosses a tile
edge at that row: N_KV - N_Q has to take the one residue modulo BLOCK_N that shows it. So the cases cover all
of them (chapter 7, section 7.4), with 16-row tiles to keep the CPU interpreter quick.
"""
import pytest
import torch

from fa2.chapters.fast import attention_fast
from fa2.chapters.forward import attention_forward
from fa2.testing import causal_boundary_cases, check_causal_boundaries

BLOCK = 16


def generic(module=None):
    """fn(q, k, v, causal, scale, i) for check_causal_boundaries: chapter 5's kernel with 16-row tiles."""
    forward = attention_forward if module is None else module.attention_forward
    return lambda q, k, v, causal, scale, i: forward(q, k, v, causal, scale, BLOCK, BLOCK)


def hopper(module=None):
    """The same for chapter 6's kernel; odd cases use device-side descriptors, even ones host descriptors."""
    fast = attention_fast if module is None else module.attention_fast
    config = dict(BLOCK_M=BLOCK, BLOCK_N=BLOCK)
    return lambda q, k, v, causal, scale, i: fast(q, k, v, causal, scale, config=config, host_desc=i % 2 == 0)


def test_cases_cover_every_residue():
    cases = causal_boundary_cases(BLOCK, BLOCK)
    diagonals = [nk - nq for nq, nk in cases]
    assert {d % BLOCK for d in diagonals if d > 0} == set(range(BLOCK))
    assert {d % BLOCK for d in diagonals if d < 0} == set(range(BLOCK))
    assert {nq % BLOCK for nq, _ in cases} == set(range(BLOCK))


@pytest.mark.parametrize("kernel", [generic, hopper], ids=["generic", "fast"])
def test_causal_at_every_diagonal_residue(kernel):
    torch.manual_seed(0)
    check_causal_boundaries(kernel(), BLOCK, BLOCK)
