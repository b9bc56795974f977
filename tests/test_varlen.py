"""Chapter 10's kernel and its API: packed variable-length batches, sliding windows, softcap (fp64 references,
derived bounds), the tiles a window skips, untouched neighbours, errors that name the argument, torch.compile."""
import math

import pytest
import torch

import fa2
from fa2 import runtime
from fa2.chapters import varlen as chapter
from fa2.chapters.decode_reference import decode_reference
from fa2.chapters.varlen_reference import (masked_attention_reference, random_varlen, varlen_reference,
                                           visible_window)
from fa2.testing import check_attention, check_varlen

from conftest import requires_gpu

DTYPES = (torch.float16, torch.bfloat16)
BM, BN = chapter.INTERPRETER_CONFIG["BLOCK_M"], chapter.INTERPRETER_CONFIG["BLOCK_N"]   # the tile-count tests' tiles


def api(q, k, v, cu_q, cu_k, max_q, max_k, **kw):
    return fa2.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, return_lse=True, **kw)


def kernel(tma):
    return lambda q, k, v, cu_q, cu_k, max_q, max_k, **kw: chapter.attention_varlen_forward(
        q, k, v, cu_q, cu_k, max_q, max_k, tma=tma, **kw)


VARLEN_CASES = {  # (lengths_q, lengths_k, Hq, Hkv, D)
    "empty-one-tails": ([1, 0, 37, 64, 5], [1, 3, 37, 64, 0], 4, 2, 32),   # 0 queries; 0 keys; tails past a tile
    "nq-ne-nk-gqa3": ([20, 50], [45, 17], 6, 2, 16),                      # rows with no key when causal
    "d80-mqa": ([33, 9], [40, 9], 2, 1, 80),                               # a head dim that is no power of two
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", VARLEN_CASES, ids=list(VARLEN_CASES))
def test_varlen_matches_fp64(case, causal, dtype):
    lengths_q, lengths_k, Hq, Hkv, D = VARLEN_CASES[case]
    check_varlen(api, lengths_q, lengths_k, Hq, Hkv, D, dtype, causal)


WINDOWS = [(0, 0), (5, -1), (5, 3), (-1, 4), (40, 40), (3, 100)]   # most smaller than a 16-key tile


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"w{w[0]}_{w[1]}")
def test_sliding_window_matches_fp64(window, causal):
    check_varlen(api, [50, 17, 0, 64], [70, 17, 3, 40], 4, 2, 16, torch.float16, causal, window=window)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("softcap", [1.0, 30.0])
def test_softcap_matches_fp64(softcap, dtype):
    check_varlen(api, [40, 1, 23], [40, 9, 60], 4, 1, 32, dtype, causal=True, softcap=softcap, scale=0.5)
    check_varlen(api, [40, 23], [40, 60], 2, 2, 32, dtype, window=(9, 2), softcap=softcap)


def test_softcap_changes_the_answer():
    """The softcap tests would pass with softcap ignored unless the reference moves: it does, by far."""
    q, k, v, cu_q, cu_k = random_varlen([30], [30], 2, 2, 32, torch.float32)
    capped = varlen_reference(q, k, v, cu_q, cu_k, scale=1.0, softcap=1.0)[0]
    assert (capped - varlen_reference(q, k, v, cu_q, cu_k, scale=1.0)[0]).abs().max() > 0.1


@pytest.mark.parametrize("D", [1, 8, 40, 256])
def test_every_head_dim(D):
    """The tile is the next power of two (at least 16) wide, its extra columns loaded as zeros; on a GPU,
    D = 1 (2-byte rows, no 16-byte multiple) takes the pointer path."""
    check_varlen(api, [21, 3], [30, 3], 2, 1, D, torch.bfloat16, True, window=(7, -1), softcap=5.0)


@pytest.mark.parametrize("tma", [True, False], ids=["tma", "pointers"])
def test_both_load_paths(tma):
    """Device TMA descriptors (emulated by the interpreter) and masked pointer loads (GPUs without TMA)."""
    check_varlen(kernel(tma), [1, 0, 37, 64], [1, 3, 50, 64], 4, 2, 32, torch.bfloat16, True, window=(20, -1))
    check_varlen(kernel(tma), [33, 16], [40, 0], 2, 1, 24, torch.float16, softcap=5.0)


@pytest.mark.parametrize("layout", ["bhnd", "bnhd", "strided"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_with_window_and_softcap(causal, layout):
    attention = lambda q, k, v, **kw: fa2.attention(q, k, v, return_lse=True, **kw)
    check_attention(attention, 2, 4, 2, 37, 50, 32, torch.bfloat16, causal, layout, window=(6, 9))
    check_attention(attention, 1, 4, 1, 50, 21, 16, torch.float16, causal, layout, softcap=2.0)
    check_attention(attention, 1, 2, 2, 33, 33, 64, torch.float16, causal, layout, window=(-1, 0), softcap=20.0)


def test_attention_without_window_keeps_the_fast_path(monkeypatch):
    """window None, or (-1, -1) with no softcap, is plain attention: the plan path, bit for bit."""
    q, k, v = (torch.randn(1, 2, 40, 32, dtype=torch.float16, device=runtime.DEVICE) for _ in range(3))
    monkeypatch.setattr(fa2.api, "attention_masked", lambda *a: pytest.fail("took the window kernel"))
    plain = fa2.attention(q, k, v, causal=True)
    assert torch.equal(fa2.attention(q, k, v, causal=True, window=(-1, -1), softcap=0.0), plain)


def expected_tiles(lengths_q, lengths_k, H, causal, window):
    """Per program, by brute force: (key tiles with a visible score, tiles whose every score is visible)."""
    m_tiles = math.ceil(max(lengths_q) / BM)
    tiles = torch.zeros(len(lengths_q), H, m_tiles, 2, dtype=torch.int32)
    for b, (n_q, n_k) in enumerate(zip(lengths_q, lengths_k)):
        visible = visible_window(n_q, n_k, causal, window)
        for m in range(math.ceil(n_q / BM)):
            for t in range(math.ceil(n_k / BN)):
                block = visible[m * BM:(m + 1) * BM, t * BN:(t + 1) * BN]
                if block.any():
                    tiles[b, :, m, 1 if block.all() and block.shape[1] == BN else 0] += 1
    return tiles.flatten()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("window", [None, (0, 0), (5, -1), (20, 3), (-1, 7), (40, 40)], ids=str)
def test_window_skips_every_invisible_tile_and_masks_only_partial_ones(window, causal):
    """The kernel's loop bounds, reported by its COUNT_TILES output, against a brute-force count: each program
    runs exactly the tiles holding a visible score, and runs mask-free exactly those where all are visible."""
    lengths_q, lengths_k = [100, 7, 0, 64, 50], [100, 40, 5, 64, 0]
    q, k, v, cu_q, cu_k = random_varlen(lengths_q, lengths_k, 2, 1, 16, torch.float16)
    tiles = torch.zeros(len(lengths_q) * 2 * math.ceil(100 / BM) * 2, dtype=torch.int32, device=q.device)
    chapter.attention_varlen_forward(q, k, v, cu_q, cu_k, 100, 100, causal, window=window, tiles=tiles,
                                     config=chapter.INTERPRETER_CONFIG)
    assert torch.equal(tiles.cpu(), expected_tiles(lengths_q, lengths_k, 2, causal, window))


def test_window_work_follows_the_window_not_n():
    n, left = 512, 16
    q, k, v, cu_q, cu_k = random_varlen([n], [n], 1, 1, 16, torch.float16)
    work = {}
    for name, window in (("causal", None), ("window", (left, -1))):
        tiles = torch.zeros(math.ceil(n / BM) * 2, dtype=torch.int32, device=q.device)
        chapter.attention_varlen_forward(q, k, v, cu_q, cu_k, n, n, True, window=window, tiles=tiles,
                                         config=chapter.INTERPRETER_CONFIG)
        work[name] = tiles.view(-1, 2).sum(1)                       # key tiles per query tile
    assert work["causal"].tolist() == [(m + 1) * BM // BN for m in range(n // BM)]
    assert work["window"].max().item() <= math.ceil((BM + left) / BN) + 1


def _filled(t, value):
    """Poison a new floating-point buffer (the outputs); leave integer ones alone (on a GPU, Triton's scratch for
    device-side TMA descriptors is an int8 torch.empty, and 1234 or NaN do not fit in it)."""
    return t.fill_(value) if t.is_floating_point() else t


def test_stores_stay_inside_their_sequences(monkeypatch):
    """Sequences that cover only rows 8..40 of 50: the other rows of o and lse keep what was there."""
    sentinel = 1234.0
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: _filled(real_empty_like(t, **kw), sentinel))
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: _filled(real_empty(*a, **kw), sentinel))
    q, k, v, _, _ = random_varlen([50], [50], 2, 1, 32, torch.float16)
    cu = torch.tensor([8, 20, 20, 41], dtype=torch.int32, device=q.device)
    o, lse = chapter.attention_varlen_forward(q, k, v, cu, cu, 21, 21, True, window=(4, -1))
    outside = torch.cat([torch.arange(8), torch.arange(41, 50)])
    assert (o[outside] == sentinel).all() and (lse[:, outside] == sentinel).all()
    ref_o, ref_lse = varlen_reference(q, k, v, cu, cu, True, window=(4, -1))
    torch.testing.assert_close(o[8:41].double(), ref_o[8:41], atol=2e-3, rtol=0)
    torch.testing.assert_close(lse[:, 8:41].double(), ref_lse[:, 8:41], atol=1e-5, rtol=0)


def test_every_output_row_is_written(monkeypatch):
    """Outputs allocated as NaN: a row the kernel forgets stays NaN and fails the finiteness check."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: _filled(real_empty_like(t, **kw), math.nan))
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: _filled(real_empty(*a, **kw), math.nan))
    check_varlen(api, [1, 0, 37, 5], [1, 3, 37, 0], 4, 2, 32, torch.float16, True, window=(3, -1))


def test_no_host_reads_of_cu_seqlens(monkeypatch):
    """The host never looks at cu_seqlens' values (that would be a GPU sync): reading them fails the test."""
    q, k, v, cu_q, cu_k = random_varlen([9, 30], [9, 30], 2, 1, 16, torch.float16)
    forbidden = lambda *a, **kw: pytest.fail("cu_seqlens read on the host")
    for t in (cu_q, cu_k):
        for name in ("item", "tolist", "cpu", "numpy", "__int__", "__index__"):
            monkeypatch.setattr(t, name, forbidden, raising=False)
    fa2.attention_varlen(q, k, v, cu_q, cu_k, 30, 30, causal=True, window=(5, -1))


def test_decode_window_means_the_same():
    """fa2.decode's window is causal flash-attn semantics: its reference equals chapter 10's, right ignored."""
    q = torch.randn(2, 4, 3, 16, dtype=torch.float64)
    k, v = torch.randn(2, 2, 40, 16, dtype=torch.float64), torch.randn(2, 2, 40, 16, dtype=torch.float64)
    for window in ((7, 0), (7, 5), (0, -1)):
        o, lse = decode_reference(q, k, v, window=window, softcap=3.0)
        ref_o, ref_lse = masked_attention_reference(q, k, v, True, None, window, 3.0, return_lse=True)
        torch.testing.assert_close(o, ref_o)
        torch.testing.assert_close(lse, ref_lse)


def test_torch_compile_fullgraph():
    q, k, v, cu_q, cu_k = random_varlen([9, 24], [9, 30], 4, 2, 32, torch.bfloat16)
    varlen = lambda q, k, v: fa2.attention_varlen(q, k, v, cu_q, cu_k, 24, 30, causal=True, window=(8, -1),
                                                  softcap=10.0, return_lse=True)
    compiled = torch.compile(varlen, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(q, k, v), varlen(q, k, v)):
        torch.testing.assert_close(got, want)
    q, k, v = (torch.randn(1, 4, 24, 32, dtype=torch.bfloat16, device=runtime.DEVICE) for _ in range(3))
    windowed = lambda q, k, v: fa2.attention(q, k, v, causal=True, window=(5, 0), softcap=3.0)
    compiled = torch.compile(windowed, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v), windowed(q, k, v))


def _good():
    q, k, v, cu_q, cu_k = random_varlen([5, 11], [7, 11], 4, 2, 32, torch.float16)
    return dict(q=q, k=k, v=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=11, max_seqlen_k=11)


BAD = {  # id: (what to change, exception, text the message must contain)
    "q-fp32": (lambda a: dict(q=a["q"].float()), TypeError, "q must be float16"),
    "k-dtype": (lambda a: dict(k=a["k"].bfloat16()), TypeError, "k is torch.bfloat16"),
    "q-4d": (lambda a: dict(q=a["q"][None]), ValueError, "q must be 3-D"),
    "v-shape": (lambda a: dict(v=a["v"][:, :1]), ValueError, "v must have k's shape"),
    "heads": (lambda a: dict(k=a["k"].repeat(1, 3, 1)[:, :3], v=a["v"].repeat(1, 3, 1)[:, :3]), ValueError,
              "not a multiple of k's and v's 3 heads"),
    "head-dim": (lambda a: dict(k=a["k"][..., :16], v=a["v"][..., :16]), ValueError, "k has head dim 16"),
    "stride": (lambda a: dict(q=a["q"].repeat(1, 1, 2)[..., ::2]), ValueError, "q must have a contiguous last"),
    "cu-int64": (lambda a: dict(cu_seqlens_q=a["cu_seqlens_q"].long()), TypeError, "cu_seqlens_q must be int32"),
    "cu-2d": (lambda a: dict(cu_seqlens_k=a["cu_seqlens_k"][None]), ValueError, "cu_seqlens_k must be 1-D"),
    "cu-short": (lambda a: dict(cu_seqlens_q=a["cu_seqlens_q"][:1]), ValueError, "cu_seqlens_q must be 1-D"),
    "cu-list": (lambda a: dict(cu_seqlens_q=[0, 5, 16]), TypeError, "cu_seqlens_q must be a torch.Tensor"),
    "cu-batch": (lambda a: dict(cu_seqlens_k=a["cu_seqlens_k"][:2]), ValueError, "cu_seqlens_k has shape"),
    "cu-device": (lambda a: dict(cu_seqlens_k=a["cu_seqlens_k"].to("meta")), ValueError, "cu_seqlens_k is on meta"),
    "max-float": (lambda a: dict(max_seqlen_q=11.0), TypeError, "max_seqlen_q must be an int"),
    "max-negative": (lambda a: dict(max_seqlen_k=-1), TypeError, "max_seqlen_k must be an int >= 0"),
    "window-one": (lambda a: dict(window=(3,)), ValueError, "window must be None or \\(left, right\\)"),
    "window-minus-2": (lambda a: dict(window=(-2, 0)), ValueError, "window must be"),
    "window-float": (lambda a: dict(window=(1.5, 2)), ValueError, "window must be"),
    "window-bool": (lambda a: dict(window=(True, 0)), ValueError, "window must be"),
    "softcap-negative": (lambda a: dict(softcap=-1.0), TypeError, "softcap must be"),
    "softcap-nan": (lambda a: dict(softcap=math.nan), TypeError, "softcap must be"),
    "causal": (lambda a: dict(causal="yes"), TypeError, "causal must be a bool"),
    "scale": (lambda a: dict(scale=math.inf), TypeError, "scale must be a finite number"),
}


@pytest.mark.parametrize("bad", BAD, ids=list(BAD))
def test_bad_input_raises_naming_the_argument(bad):
    change, exc, text = BAD[bad]
    args = _good()
    with pytest.raises(exc, match=f"fa2.attention_varlen: .*{text}"):
        fa2.attention_varlen(**{**args, **change(args)})


def test_attention_checks_window_and_softcap():
    q, k, v = (torch.randn(1, 2, 8, 16, dtype=torch.float16, device=runtime.DEVICE) for _ in range(3))
    with pytest.raises(ValueError, match="fa2.attention: window must be"):
        fa2.attention(q, k, v, window=(1, 2, 3))
    with pytest.raises(TypeError, match="fa2.attention: softcap must be"):
        fa2.attention(q, k, v, softcap="big")
    with pytest.raises(ValueError, match="fa2.attention: k has batch"):
        fa2.attention(q, torch.cat([k, k]), torch.cat([v, v]), window=(2, 2))


# ------------------------------------------------------------------------------------------------ GPU only

@requires_gpu
@pytest.mark.parametrize("tma", [True, False], ids=["tma", "pointers"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_gpu_varlen_tiles_and_windows(dtype, tma):
    """The GPU's tile configs: lengths around tile multiples, GQA, windows, softcap."""
    lengths_q = [1, 0, 127, 128, 129, 300, 1000]
    lengths_k = [1, 5, 127, 200, 129, 300, 640]
    configs = [None, dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3),
               dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2),
               dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=3)]
    for config in configs:
        fn = lambda *a, **kw: chapter.attention_varlen_forward(*a, config=config, tma=tma, **kw)
        for causal, window, softcap in [(False, None, None), (True, None, None), (True, (100, -1), None),
                                        (False, (33, 70), 30.0), (True, (5, -1), 2.0)]:
            check_varlen(fn, lengths_q, lengths_k, 8, 2, 128, dtype, causal, window=window, softcap=softcap)


@requires_gpu
def test_gpu_no_sync_and_cuda_graph():
    """No host synchronisation (torch's sync debug mode raises on one) and a capturable call."""
    q, k, v, cu_q, cu_k = random_varlen([100, 1000, 7], [100, 1000, 7], 8, 2, 128, torch.bfloat16)
    call = lambda: fa2.attention_varlen(q, k, v, cu_q, cu_k, 1000, 1000, causal=True, window=(64, -1))
    want = call()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        call()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = call()
    q.copy_(torch.randn_like(q))
    graph.replay()
    torch.testing.assert_close(o, call())
    assert not torch.equal(o, want)

