"""Every head dim on chapter 6's Hopper kernel (under the interpreter on a CPU): power-of-two dims as one column
tile, the others as two column pieces (96 = 64 + 32), against fp64 -- tails, causal with N_Q != N_KV, GQA and
MQA, fp16 and bf16, both kinds of TMA descriptor -- and with no copy of the inputs."""
import inspect
import math

import pytest
import torch

import fa2
from fa2 import plan as plans
from fa2 import runtime
from fa2.chapters import fast
from fa2.chapters.fast import _fa2_fast_kernel, attention_fast, fast_launch, head_dim_pieces
from fa2.testing import check_attention, make_qkv, mutant

HEAD_DIMS = [32, 64, 80, 96, 128, 160, 192, 256, 40, 72, 200]
# (dtype, causal, B, Hq, Hkv, Nq, Nk, host descriptors): each head dim runs all three
VARIANTS = {
    "bf16-causal-gqa-nq<nk-host": (torch.bfloat16, True, 1, 4, 2, 33, 45, True),
    "fp16-causal-mqa-nq>nk-device": (torch.float16, True, 1, 2, 1, 45, 33, False),  # rows with no visible key
    "fp16-full-mha-tails-host": (torch.float16, False, 2, 2, 2, 40, 40, True),
}


def hopper(host_desc, module=fast):
    return lambda q, k, v, causal, scale: module.attention_fast(q, k, v, causal, scale, host_desc=host_desc)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("D", HEAD_DIMS)
def test_every_head_dim_against_fp64(D, variant):
    dtype, causal, B, Hq, Hkv, Nq, Nk, host_desc = VARIANTS[variant]
    check_attention(hopper(host_desc), B, Hq, Hkv, Nq, Nk, D, dtype, causal)


def test_the_head_dims_above_cover_both_paths():
    """The list holds one-piece and two-piece head dims, and two-piece ones with zero-filled columns (40, 72)."""
    pieces = {D: head_dim_pieces(D) for D in HEAD_DIMS}
    assert {D for D, (_, second) in pieces.items() if second} == {40, 72, 80, 96, 160, 192}
    assert [D for D, (first, second) in pieces.items() if second and first + second > D] == [40, 72]


@pytest.mark.parametrize("host_desc", [True, False], ids=["host", "device"])
@pytest.mark.parametrize("D, pieces", [(96, (64, 32)), (160, (128, 32)), (128, (128, 0)), (200, (256, 0))])
def test_launch_uses_the_pieces(D, pieces, host_desc):
    """What the kernel is launched with: BLOCK_D and BLOCK_D1, and host descriptors whose boxes are the pieces."""
    q, k, v = make_qkv(1, 2, 2, 40, 40, D, torch.bfloat16)
    o, lse = torch.empty_like(q), torch.empty(1, 2, 40)
    _, args, _ = fast_launch(q, k, v, o, lse, host_desc=host_desc)
    named = dict(zip(inspect.signature(_fa2_fast_kernel.fn).parameters, args))   # the JIT's or interpreter's
    assert (named["HEAD_DIM"], named["BLOCK_D"], named["BLOCK_D1"]) == (D, *pieces)
    second = [named[name] for name in ("Q1", "K1", "V1", "O1")]
    if host_desc and pieces[1]:
        assert [d.block_shape[-1] for d in second] == [pieces[1]] * 4
        assert all(d.shape[-1] == D and d.base is t for d, t in zip(second, (q, k, v, o)))   # true D: clipped
        assert named["Q"].block_shape[-1] == pieces[0]
    else:
        assert second == [None] * 4


@pytest.mark.parametrize("host_desc", [True, False], ids=["host", "device"])
@pytest.mark.parametrize("D", [96, 72])
def test_every_output_element_written(D, host_desc, monkeypatch):
    """Outputs start as NaN: a column of the second piece the kernel does not store stays NaN and fails."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real_empty_like(t, **kw).fill_(math.nan))
    poison = lambda t: t.fill_(math.nan) if t.is_floating_point() else t   # not the int8 TMA scratch buffer
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poison(real_empty(*a, **kw)))
    check_attention(hopper(host_desc), 1, 2, 1, 50, 50, D, torch.float16, True)


# Bugs in the second piece only: each must fail the check at D = 96 (and leaves D = 64 right)
SECOND_PIECE_BUGS = {
    "scores miss the second piece": {"scores = tl.dot(q1, k1.T, scores)": "scores = scores"},
    "second accumulator not rescaled": {"acc1 * alpha[:, None])": "acc1)"},
    "second piece of V read at column 0": {"v1 = _tile(desc_v1, off_b, off_kv_h, kv_tile_start, BLOCK_D,":
                                           "v1 = _tile(desc_v1, off_b, off_kv_h, kv_tile_start, 0,"},
}


@pytest.mark.parametrize("bug", SECOND_PIECE_BUGS)
def test_a_bug_in_the_second_piece_is_caught(bug):
    """300 keys are three tiles or more at every BLOCK_N a GPU autotunes over: with one tile the accumulators are
    never rescaled (the first tile starts from zeros), and the rescaling bug could not fail."""
    module = mutant(fast, SECOND_PIECE_BUGS[bug])
    check_attention(hopper(True, module), 1, 2, 1, 40, 300, 64, torch.bfloat16, False)   # one piece: untouched
    with pytest.raises(AssertionError):
        check_attention(hopper(True, module), 1, 2, 1, 40, 300, 96, torch.bfloat16, False)


def test_api_on_the_hopper_path_makes_no_copy(monkeypatch, request):
    """fa2.attention through chapter 6's kernel (as on an H100/H200) at D = 96: no padded or contiguous copy of
    q, k or v, and nothing allocated but o (..., 96) and the LSE."""
    config = dict(BLOCK_M=32, BLOCK_N=32, num_warps=4, num_stages=2)   # a fixed one: nothing tuned on a GPU
    monkeypatch.setattr(plans, "kernel_for", lambda q, k, v: "fast")
    monkeypatch.setattr(plans, "select_config", lambda *a: config)
    monkeypatch.setattr(plans, "PLANS", {})
    q, k, v = (torch.randn(1, 2, 40, 96, dtype=torch.bfloat16, device=runtime.DEVICE) for _ in range(3))
    allocated = request.getfixturevalue("allocations")       # from here on, a copy fails the test
    o, lse = fa2.attention(q, k, v, causal=True, return_lse=True)
    plan, = plans.PLANS.values()
    assert plan.kernel == "fast" and [layout[2][-1] for layout in plan.layouts] == [64] * 4 + [32] * 4
    assert set(allocated) == {(1, 2, 40, 96), (1, 2, 40)}, allocated   # outputs (the plan makes a pair once)
    monkeypatch.undo()
    o_ref, lse_ref = attention_fast(q, k, v, True, config=config, host_desc=True)   # checked against fp64 above
    assert torch.equal(o, o_ref) and torch.equal(lse, lse_ref)
