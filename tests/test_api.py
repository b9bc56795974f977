"""fa2.attention: correctness over the shapes the API promises, clear errors, torch.compile, every output written."""
import math

import pytest
import torch

import fa2
from fa2 import runtime
from fa2.chapters.fast import attention_fast
from fa2.chapters.forward import attention_forward
from fa2.testing import check_attention

DTYPES = (torch.float16, torch.bfloat16)
CASES = [  # (B, Hq, Hkv, Nq, Nk, D)
    (2, 4, 4, 64, 64, 32),    # MHA, whole tiles
    (1, 4, 2, 37, 70, 16),    # GQA, tails, Nq < Nk
    (1, 6, 1, 70, 37, 32),    # MQA, Nq > Nk: causal rows with no visible key
    (1, 2, 2, 1, 45, 64),     # one query row
]


def api(q, k, v, causal, scale):
    return fa2.attention(q, k, v, causal=causal, scale=scale, return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c)))
def test_attention_matches_reference(case, causal, dtype):
    check_attention(api, *case, dtype=dtype, causal=causal)


@pytest.mark.parametrize("layout", ["bnhd", "strided"])
def test_strided_inputs(layout):
    check_attention(api, 2, 4, 2, 33, 40, 32, torch.bfloat16, True, layout=layout)


@pytest.mark.parametrize("D", [1, 8, 24, 40, 48, 72, 80, 96, 128, 160, 192, 200, 256])
def test_every_head_dim_natively(D):
    check_attention(api, 1, 2, 1, 20, 37, D, torch.float16, True)


@pytest.mark.parametrize("D", [80, 96, 160, 192])
def test_non_power_of_two_head_dims_with_tails_and_gqa(D):
    """Chapter 5's kernel (the Hopper kernel's head dims: tests/test_headdim.py)."""
    check_attention(attention_forward, 1, 4, 2, 33, 45, D, torch.bfloat16, True)


def test_non_power_of_two_head_dim_makes_no_copy_of_the_inputs(request):
    """D = 80 runs a 128-wide tile with masked (zero-filled) columns: no padded copy of q, k or v (chapter 5's
    kernel on a CPU; the Hopper kernel's two column pieces: tests/test_headdim.py)."""
    q, k, v = (torch.randn(1, 2, 40, 80, dtype=torch.bfloat16, device=runtime.DEVICE) for _ in range(3))
    allocated = request.getfixturevalue("allocations")       # from here on, a copy fails the test
    o = fa2.attention(q, k, v, causal=True)
    assert o.shape == q.shape
    assert all(80 in shape or len(shape) == 3 for shape in allocated), allocated   # o (…, 80) and lse


def test_custom_scale():
    check_attention(api, 1, 2, 2, 32, 32, 32, torch.bfloat16, False, scale=0.3)


@pytest.mark.parametrize("kernel", ["generic", "fast"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_both_kernels_directly(kernel, dtype):
    fn = attention_forward if kernel == "generic" else (lambda q, k, v, causal, scale: attention_fast(
        q, k, v, causal, scale, host_desc=True))
    for causal in (False, True):
        check_attention(fn, 1, 4, 2, 45, 70, 32, dtype, causal)
        check_attention(fn, 1, 4, 1, 70, 45, 16, dtype, causal)


@pytest.mark.parametrize("kernel", ["generic", "fast"])
def test_every_output_element_written(kernel, monkeypatch):
    """Outputs start as NaN (poisoned allocations): a row the kernel forgets stays NaN and fails the check."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real_empty_like(t, **kw).fill_(math.nan))
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real_empty(*a, **kw).fill_(math.nan))
    fn = attention_forward if kernel == "generic" else (lambda q, k, v, causal, scale: attention_fast(
        q, k, v, causal, scale, host_desc=True))
    check_attention(fn, 1, 2, 2, 50, 50, 32, torch.float16, True)


def test_lse_is_logsumexp_and_rows_without_keys_are_zero():
    q, k, v = (torch.randn(1, 2, n, 32, dtype=torch.float16, device=runtime.DEVICE) for n in (40, 10, 10))
    o, lse = fa2.attention(q, k, v, causal=True, return_lse=True)
    # bottom-right: query row i sees keys j <= i + 10 - 40, so rows 0..29 see nothing
    assert (o[:, :, :30] == 0).all() and torch.isneginf(lse[:, :, :30]).all()
    assert torch.isfinite(o).all() and torch.isfinite(lse[:, :, 30:]).all()


def test_torch_compile_fullgraph():
    q, k, v = (torch.randn(1, 4, 24, 32, dtype=torch.bfloat16, device=runtime.DEVICE) for _ in range(3))
    compiled = torch.compile(lambda q, k, v: fa2.attention(q, k, v, causal=True), backend="aot_eager",
                             fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), fa2.attention(q, k, v, causal=True))


def _good():
    return [torch.randn(1, 4, 16, 32, dtype=torch.float16, device=runtime.DEVICE) for _ in range(3)]


@pytest.mark.parametrize("mutate, exc, names", [
    (lambda q, k, v: (q.float(), k, v), TypeError, "q"),
    (lambda q, k, v: (q, k.bfloat16(), v), TypeError, "k"),
    (lambda q, k, v: (q, k, v.bfloat16()), TypeError, "v"),
    (lambda q, k, v: (q[0], k, v), ValueError, "q"),
    (lambda q, k, v: (q.tolist(), k, v), TypeError, "q"),
    (lambda q, k, v: (q, k[:, :3], v[:, :3]), ValueError, "heads"),
    (lambda q, k, v: (q, k[..., :16], v[..., :16]), ValueError, "head dim"),
    (lambda q, k, v: (q, k, v[:, :, :8]), ValueError, "v"),
    (lambda q, k, v: (q, torch.cat([k, k]), torch.cat([v, v])), ValueError, "batch"),
    (lambda q, k, v: (q[:, :, :0], k, v), ValueError, "empty"),
    (lambda q, k, v: tuple(torch.randn(1, 4, 8, 512, dtype=torch.float16, device=q.device) for _ in range(3)), ValueError,
     "head dim 512"),
], ids=["q-fp32", "k-dtype", "v-dtype", "q-3d", "q-list", "gqa-ratio", "k-headdim", "v-shape", "batch",
        "empty", "headdim-512"])
def test_bad_input_raises_naming_the_argument(mutate, exc, names):
    with pytest.raises(exc, match=names):
        fa2.attention(*mutate(*_good()))


def test_bad_flags_raise():
    q, k, v = _good()
    with pytest.raises(TypeError, match="causal"):
        fa2.attention(q, k, v, causal="yes")
    with pytest.raises(TypeError, match="scale"):
        fa2.attention(q, k, v, scale=float("nan"))


def test_inputs_that_need_grad_raise_instead_of_dropping_gradients():
    q, k, v = _good()
    q.requires_grad_(True)
    with pytest.raises(NotImplementedError, match="forward-only"):
        fa2.attention(q, k, v)
    with torch.no_grad():
        assert fa2.attention(q, k, v).shape == q.shape
