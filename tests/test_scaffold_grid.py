"""Chapters 2 and 3 as a package: the copy kernel proves the addressing, the ownership kernel the FA2 grid."""
import pytest
import torch
import triton

from fa2 import runtime
from fa2.chapters.grid import expected_owner_map, grid_ownership
from fa2.chapters.scaffold import scaffold_copy

DTYPES = (torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "every other token", "every other feature")


def make(B, H, N, D, dtype, layout):
    """A (B, H, N, D) random tensor in one of four memory layouts (fresh values every call)."""
    randn = lambda *shape: torch.randn(*shape, device=runtime.DEVICE).to(dtype)
    return {
        "contiguous": lambda: randn(B, H, N, D),
        "transposed": lambda: randn(B, N, H, D).transpose(1, 2),
        "every other token": lambda: randn(B, H, 2 * N, D)[:, :, ::2, :],
        "every other feature": lambda: randn(B, H, N, 2 * D)[..., ::2],
    }[layout]()


def poisoned_outputs(B, H, N, D, dtype, o_layout="contiguous", lse_fill=float("nan")):
    o = make(B, H, N, D, dtype, o_layout).fill_(float("nan"))
    return o, torch.full((B, H, N), lse_fill, device=runtime.DEVICE)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("B, Hq, Hkv, N_Q, N_KV, D, block_m", [(2, 4, 2, 37, 20, 32, 16), (1, 3, 1, 64, 64, 16, 32)])
def test_scaffold_copy_is_exact(B, Hq, Hkv, N_Q, N_KV, D, block_m, dtype, layout):
    q = make(B, Hq, N_Q, D, dtype, layout)
    k, v = make(B, Hkv, N_KV, D, dtype, layout), make(B, Hkv, N_KV, D, dtype, layout)
    o, lse = scaffold_copy(q, k, v, block_m=block_m, out=poisoned_outputs(B, Hq, N_Q, D, dtype, "transposed"))
    assert not o.isnan().any() and not lse.isnan().any()
    assert torch.equal(o, q)
    rows = torch.arange(N_Q, dtype=torch.float32, device=runtime.DEVICE)
    assert torch.equal(lse, rows.expand(B, Hq, N_Q))


def test_scaffold_copy_allocates_outputs():
    q = make(1, 2, 5, 64, torch.float16, "transposed")
    o, lse = scaffold_copy(q, q[:, :1], q[:, :1])
    assert torch.equal(o, q) and o.is_contiguous()
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 5) and lse.is_contiguous()


@pytest.mark.parametrize("call, error", [
    (lambda q: scaffold_copy(q[..., :24], q[..., :24], q[..., :24]), ValueError),        # head dim 24
    (lambda q: scaffold_copy(q.float(), q.float(), q.float()), TypeError),              # fp32
    (lambda q: scaffold_copy(q, q.bfloat16(), q.bfloat16()), TypeError),                # mixed dtypes
    (lambda q: scaffold_copy(q[:, :3], q[:, :2], q[:, :2]), ValueError),                # 3 % 2 heads
    (lambda q: scaffold_copy(q, q[:1], q[:1]), ValueError),                              # batch mismatch
    (lambda q: scaffold_copy(q, q, q[..., :8, :]), ValueError),                         # k, v shapes differ
    (lambda q: scaffold_copy(q, q, q, block_m=8), ValueError),                          # tile too small
    (lambda q: scaffold_copy(q[0], q[0], q[0]), ValueError),                            # 3-D
    (lambda q: grid_ownership(q, q, q, block_m=48), ValueError),                        # not a power of two
    (lambda q: grid_ownership(q, q, q, out=(q, torch.zeros(2, 4, 15))), ValueError),    # lse has the wrong shape
])
def test_bad_calls_raise(call, error):
    q = torch.randn(2, 4, 16, 32, device=runtime.DEVICE).half()
    with pytest.raises(error):
        call(q)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ("contiguous", "transposed", "every other feature"))
@pytest.mark.parametrize("B, Hq, Hkv, N_Q, N_KV, D, block_m", [
    (2, 4, 4, 37, 20, 32, 16),     # MHA, tail
    (1, 8, 2, 64, 33, 16, 16),     # GQA
    (2, 6, 1, 21, 7, 64, 32),      # MQA, one short tile
])
def test_grid_ownership(B, Hq, Hkv, N_Q, N_KV, D, block_m, dtype, layout):
    q = make(B, Hq, N_Q, D, dtype, layout)
    k, v = make(B, Hkv, N_KV, D, dtype, layout), make(B, Hkv, N_KV, D, dtype, layout)
    out = poisoned_outputs(B, Hq, N_Q, D, dtype, layout, lse_fill=-1.0)  # O NaN, owner map unclaimed
    o, owner = grid_ownership(q, k, v, block_m=block_m, out=out)
    assert not o.isnan().any()
    assert torch.equal(owner, expected_owner_map(B, Hq, N_Q, block_m, runtime.DEVICE))  # no -1, no inf
    q_tiles = triton.cdiv(N_Q, block_m)
    for rank in range(B * Hq * q_tiles):           # each program owns exactly its tile's rows, nothing else
        pid_bh, pid_m = divmod(rank, q_tiles)
        b, h = divmod(pid_bh, Hq)
        rows = torch.arange(pid_m * block_m, min(N_Q, (pid_m + 1) * block_m), device=runtime.DEVICE)
        assert torch.equal((owner[b, h] == rank).nonzero().flatten(), rows)
        assert (owner == rank).sum() == len(rows)
    k_row0 = k.repeat_interleave(Hq // Hkv, dim=1)[:, :, :1, :]
    assert torch.equal(o, k_row0.expand(B, Hq, N_Q, D))


def test_grid_ownership_flags_double_claims():
    q = make(1, 4, 40, 16, torch.float16, "contiguous")
    k = make(1, 2, 8, 16, torch.float16, "contiguous")
    o, owner = grid_ownership(q, k, k, block_m=16)
    assert torch.equal(owner, expected_owner_map(1, 4, 40, 16, runtime.DEVICE))
    grid_ownership(q, k, k, block_m=16, out=(o, owner))   # the same rows claimed a second time
    assert owner.isinf().all()


def test_expected_owner_map_rule():
    owner = expected_owner_map(2, 3, 37, 16)       # 3 tiles per (batch, head)
    assert owner[0, 0, :16].eq(0).all() and owner[0, 0, 32:].eq(2).all()
    assert owner[1, 2, 36] == (1 * 3 + 2) * 3 + 2
