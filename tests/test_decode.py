"""fa2.decode (Flash-Decoding): fp64 reference over ragged, paged and poisoned caches; splits; errors; graphs."""
import math

import pytest
import torch

import fa2
from fa2 import runtime
from fa2.chapters.decode_reference import decode_reference, random_cache
from fa2.chapters.flash_decoding import decode_launch, flash_decode, num_splits_heuristic
from fa2 import decoding
from fa2.decoding import _PLANS, DecodePlan, choose_num_splits
from conftest import requires_gpu

DEVICE = runtime.DEVICE


def seqlens(*values):
    return torch.tensor(values, dtype=torch.int32, device=DEVICE)


def inputs(B, Hq, Hkv, Nq, D, capacity, lengths, dtype=torch.float16, page_size=None, layout="bhnd", seed=0):
    """Fresh q and a poisoned cache (NaN past each row's length and in unused pages)."""
    gen = torch.Generator(DEVICE).manual_seed(seed)
    q = torch.randn(B, Hq, Nq, D, device=DEVICE, generator=gen).to(dtype)
    k, v, table = random_cache(B, Hkv, capacity, D, dtype, lengths, page_size, layout, generator=gen)
    return q, k, v, table


def assert_matches_reference(o, lse, q, k, v, lengths, table, scale=None, window=None, softcap=None):
    """o within the dtype's rounding of the fp64 reference; lse within fp32's; -inf exactly where no key."""
    ref_o, ref_lse = decode_reference(q, k, v, lengths, table, scale, window, softcap)
    assert o.shape == q.shape and o.dtype == q.dtype
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    assert torch.isfinite(o).all(), "NaN/inf in the output: poison leaked or a 0/0"
    tol = 1e-2 if q.dtype == torch.bfloat16 else 2e-3
    torch.testing.assert_close(o.double(), ref_o, atol=tol, rtol=tol)
    seen = torch.isfinite(ref_lse)
    assert torch.equal(torch.isneginf(lse), ~seen), "lse must be -inf exactly for rows that see no key"
    torch.testing.assert_close(lse[seen].double(), ref_lse[seen], atol=1e-4, rtol=1e-5)


CASES = [  # (B, Hq, Hkv, Nq, D, capacity, lengths, page_size, num_splits, dtype)
    (3, 2, 2, 1, 32, 80, (1, 37, 80), None, 1, torch.float16),         # MHA, one split, length 1
    (3, 2, 2, 1, 32, 80, (1, 37, 80), None, 3, torch.bfloat16),        # 3 splits that do not divide lengths
    (2, 8, 2, 4, 64, 100, (100, 45), None, None, torch.float16),       # GQA 4, Nq 4, the heuristic's splits
    (2, 8, 1, 1, 32, 96, (96, 33), 16, 4, torch.bfloat16),             # GQA 8, paged 16
    (2, 4, 1, 4, 32, 130, (130, 67), 64, 2, torch.float16),            # paged 64, a page split by tiles
    (2, 8, 1, 4, 80, 64, (64, 19), 16, 5, torch.bfloat16),             # D=80 (padded tile), 32 packed rows
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(
    str(x).replace("torch.", "") for x in c if not isinstance(x, tuple)))
def test_matches_fp64_reference(case):
    B, Hq, Hkv, Nq, D, capacity, lengths, page_size, num_splits, dtype = case
    lengths = seqlens(*lengths)
    q, k, v, table = inputs(B, Hq, Hkv, Nq, D, capacity, lengths, dtype, page_size)
    o, lse = fa2.decode(q, k, v, lengths, table, num_splits=num_splits, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, table)


def test_splits_agree_with_one_split():
    """The combine is exact up to rounding: 1, 2, 7 and 13 splits (some empty) give the same output."""
    lengths = seqlens(150, 91)
    q, k, v, _ = inputs(2, 4, 1, 1, 32, 150, lengths, torch.float16, seed=1)
    o1, lse1 = flash_decode(q, k, v, lengths, num_splits=1)
    for splits in (2, 7, 13):                      # 13 splits of <= 10 tiles: some splits get no key
        o, lse = flash_decode(q, k, v, lengths, num_splits=splits)
        torch.testing.assert_close(o, o1, atol=2e-3, rtol=0)
        torch.testing.assert_close(lse, lse1, atol=1e-5, rtol=1e-6)
    assert_matches_reference(o, lse, q, k, v, lengths, None)


@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "runs"])
@pytest.mark.parametrize("page_size", [None, 16])
def test_split_s_takes_its_tiles(page_size, interleave):
    """Interleaved, split s of S reads tiles s, s + S, s + 2S, ... of the valid keys; otherwise one run of
    ceil(tiles / S) consecutive tiles (section 9.5): its partial LSE (base 2, in the workspace) is the logsumexp of
    exactly those keys' scores."""
    block_n, splits, length = 16, 3, 100                   # 7 tiles, the last one partial
    lengths = seqlens(length)
    q, k, v, table = inputs(1, 1, 1, 1, 32, 112, lengths, torch.float16, page_size, seed=5)
    o, lse = torch.empty_like(q), torch.empty(1, 1, 1, dtype=torch.float32, device=DEVICE)
    o_part = torch.empty(1, 1, 1, splits, 32, dtype=torch.float32, device=DEVICE)
    lse_part = torch.empty(1, 1, 1, splits, dtype=torch.float32, device=DEVICE)
    for kernel, grid, args, options in decode_launch(q, k, v, lengths, table, o, lse, o_part, lse_part,
                                                     0.25, splits, -1, 0.0, block_n, 4, 1, interleave=interleave):
        kernel[grid](*args, **options)
    keys = k[0, 0, :length] if page_size is None else k[table[0].long()].reshape(-1, 32)[:length]
    scores = (keys.double() @ q[0, 0, 0].double()) * 0.25           # (length,)
    tile = torch.arange(length, device=DEVICE) // block_n
    owner = tile % splits if interleave else tile // math.ceil(7 / splits)
    for s in range(splits):
        expected = torch.logsumexp(scores[owner == s], 0) / math.log(2)
        assert abs(lse_part[0, 0, 0, s].item() - expected.item()) < 1e-3, s


def test_splits_interleave_from_interleave_min_splits():
    """The default assignment follows the split count (a shape, never a length): runs below
    INTERLEAVE_MIN_SPLITS splits, interleaved tiles from there on; both agree with fp64."""
    from fa2.chapters.flash_decoding import INTERLEAVE_MIN_SPLITS
    lengths = seqlens(300, 129)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 304, lengths, torch.bfloat16, page_size=16, seed=3)
    for splits in (INTERLEAVE_MIN_SPLITS - 1, INTERLEAVE_MIN_SPLITS):
        o, lse = torch.empty_like(q), torch.empty(q.shape[:3], dtype=torch.float32, device=DEVICE)
        o_part = torch.empty(*q.shape[:3], splits, 32, dtype=torch.float32, device=DEVICE)
        lse_part = torch.empty(*q.shape[:3], splits, dtype=torch.float32, device=DEVICE)
        launches = decode_launch(q, k, v, lengths, table, o, lse, o_part, lse_part, 32 ** -0.5, splits, -1, 0.0,
                                 16, 4, 1)
        assert launches[0][2][-2] == (splits >= INTERLEAVE_MIN_SPLITS)     # the kernel's INTERLEAVED
        for kernel, grid, args, options in launches:
            kernel[grid](*args, **options)
        assert_matches_reference(o, lse, q, k, v, lengths, table)


@pytest.mark.parametrize("page_size,block_n", [(16, 32), (16, 64), (32, 64), (64, 16)],
                         ids=["page16-tile32", "page16-tile64", "page32-tile64", "page64-tile16"])
def test_tiles_that_cover_several_pages_or_part_of_one(page_size, block_n):
    """_cache_rows reads one block-table entry per page a tile covers (page < tile) or one per tile (page >=
    tile): ragged lengths that end mid-page and mid-tile, a window (the first tile starts past key 0), pages in
    random order, and table entries past each row's pages set to a page that does not exist (never followed)."""
    lengths = seqlens(150, 37, 1)
    q, k, v, table = inputs(3, 8, 2, 2, 32, 160, lengths, torch.bfloat16, page_size, seed=7)
    used = (lengths.long() + page_size - 1) // page_size                      # pages holding keys, per row
    table[torch.arange(table.shape[1], device=DEVICE)[None, :] >= used[:, None]] = 2 ** 30
    for splits, window in ((1, None), (3, None), (2, (40, 0))):
        plan = DecodePlan(q, k, v, lengths, table, 32 ** -0.5, splits, decoding._window_left(window), 0.0,
                          config=dict(block_n=block_n))
        o, lse = plan(q, k, v, lengths, table)
        assert_matches_reference(o, lse, q, k, v, lengths, table, window=window)


def test_strided_cache_and_q():
    """Caches seen through a transpose ((B, N, H, D) buffers) and q with no unit stride but the last."""
    lengths = seqlens(50, 23)
    q, k, v, _ = inputs(2, 4, 2, 2, 32, 50, lengths, torch.bfloat16, layout="bnhd")
    q = torch.randn(2, 2, 4, 32, device=DEVICE).to(torch.bfloat16).transpose(1, 2)
    o, lse = fa2.decode(q, k, v, lengths, num_splits=2, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, None)


def test_full_capacity_when_cache_seqlens_is_none():
    full = seqlens(48, 48)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 48, full, torch.float16, page_size=16)
    o, lse = fa2.decode(q, k, v, None, table, num_splits=2, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, None, table)


@pytest.mark.parametrize("window", [(8, 0), (0, -1), (20, -1)], ids=["left8", "self-only", "left20"])
def test_sliding_window(window):
    lengths = seqlens(90, 13)
    q, k, v, table = inputs(2, 4, 2, 4, 32, 96, lengths, torch.float16, page_size=16)
    o, lse = fa2.decode(q, k, v, lengths, table, num_splits=3, window=window, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, table, window=window)


def test_softcap_and_scale():
    lengths = seqlens(60, 31)
    q, k, v, _ = inputs(2, 4, 1, 2, 32, 60, lengths, torch.bfloat16)
    o, lse = fa2.decode(q, k, v, lengths, scale=1.0, softcap=3.0, num_splits=2, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, None, scale=1.0, softcap=3.0)
    capped = decode_reference(q, k, v, lengths, scale=1.0, softcap=3.0)[0]
    uncapped = decode_reference(q, k, v, lengths, scale=1.0)[0]
    assert (capped - uncapped).abs().max() > 0.1, "the test's softcap must change the answer"


def test_rows_without_keys_are_zero_not_nan():
    """Empty rows (length 0) and queries before the first key (Nq > length) give o = 0, lse = -inf."""
    lengths = seqlens(0, 2)
    q, k, v, _ = inputs(2, 2, 1, 4, 32, 40, lengths, torch.float16)
    for splits in (1, 3):
        o, lse = fa2.decode(q, k, v, lengths, num_splits=splits, return_lse=True)
        assert (o[0] == 0).all() and torch.isneginf(lse[0]).all()
        assert (o[1, :, :2] == 0).all() and torch.isneginf(lse[1, :, :2]).all()   # pos -2, -1
        assert_matches_reference(o, lse, q, k, v, lengths, None)


def test_plan_does_not_depend_on_length_values():
    """One plan serves every cache_seqlens value (what CUDA-graph replay needs): grow the lengths in place."""
    lengths = seqlens(5, 17)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 64, seqlens(64, 64), torch.float16, page_size=16)
    fa2.decode(q, k, v, lengths, table)
    plans = len(_PLANS)
    for grown in ((40, 17), (64, 63)):
        lengths.copy_(seqlens(*grown))
        q.copy_(torch.randn_like(q))
        o, lse = fa2.decode(q, k, v, lengths, table, return_lse=True)
        assert_matches_reference(o, lse, q, k, v, lengths, table)
    assert len(_PLANS) == plans


def test_every_output_element_written(monkeypatch):
    """Outputs and workspace start as NaN: anything the kernels forget to write stays NaN and fails."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real_empty_like(t, **kw).fill_(math.nan))
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real_empty(*a, **kw).fill_(math.nan))
    _PLANS.clear()
    lengths = seqlens(33, 1)
    q, k, v, _ = inputs(2, 6, 2, 3, 24, 40, lengths, torch.float16)
    for splits in (1, 4):
        o, lse = fa2.decode(q, k, v, lengths, num_splits=splits, return_lse=True)
        assert_matches_reference(o, lse, q, k, v, lengths, None)



# ------------------------------------------------------------------------------------------- fused combine

def plans(q, k, v, lengths, table, splits):
    """(fused, two-launch) plans of one signature and split count (chapter 9, section 9.11)."""
    make = lambda fused: DecodePlan(q, k, v, lengths, table, q.shape[-1] ** -0.5, splits, -1, 0.0,
                                    config=dict(fused_combine=fused))
    return make(True), make(False)


def assert_fused_matches_two_launches(fused, two):
    """The fused combine computes the combine kernel's math (one @triton.jit helper): the fp32 results agree
    to a reordering of the same sums, so o within one rounding step of its dtype, lse within fp32's."""
    (o_f, lse_f), (o_t, lse_t) = fused, two
    torch.testing.assert_close(o_f.float(), o_t.float(), atol=1e-6, rtol=torch.finfo(o_t.dtype).eps)
    assert torch.equal(torch.isneginf(lse_f), torch.isneginf(lse_t))
    seen = torch.isfinite(lse_t)
    torch.testing.assert_close(lse_f[seen], lse_t[seen], atol=1e-5, rtol=1e-6)


FUSED_CASES = [  # (B, Hq, Hkv, Nq, D, capacity, lengths, page_size, num_splits, dtype)
    (3, 2, 2, 1, 32, 80, (0, 37, 80), None, 3, torch.float16),        # GQA 1, an empty row, 3 splits
    (2, 8, 2, 4, 64, 100, (100, 45), None, 4, torch.bfloat16),        # GQA 4, Nq 4
    (3, 8, 1, 1, 32, 96, (96, 0, 33), 16, 5, torch.bfloat16),         # GQA 8, paged 16, an empty row
    (2, 8, 1, 4, 32, 130, (130, 2), 64, 7, torch.float16),            # paged 64, queries before any key, empty splits
    (1, 16, 1, 8, 32, 40, (29,), None, 3, torch.float16),             # 128 packed rows: two M tiles, two counters
]


@pytest.mark.parametrize("case", FUSED_CASES, ids=lambda c: "-".join(
    str(x).replace("torch.", "") for x in c if not isinstance(x, tuple)))
def test_fused_combine_matches_two_launches_and_fp64(case):
    B, Hq, Hkv, Nq, D, capacity, lengths, page_size, num_splits, dtype = case
    lengths = seqlens(*lengths)
    q, k, v, table = inputs(B, Hq, Hkv, Nq, D, capacity, lengths, dtype, page_size, seed=2)
    fused, two = plans(q, k, v, lengths, table, num_splits)
    assert fused.combine is None and two.combine is not None and two.counters is None   # one launch vs two
    o, lse = fused(q, k, v, lengths, table)
    assert_matches_reference(o, lse, q, k, v, lengths, table)
    assert_fused_matches_two_launches((o, lse), two(q, k, v, lengths, table))
    assert not fused.counters.any(), "the last split of each tile must reset its counter"
    again = fused(q, k, v, lengths, table)          # a second call starts from the reset counters
    assert torch.equal(again[0], o) and torch.equal(again[1], lse)
    assert not fused.counters.any()


def test_fused_combine_follows_new_lengths_and_writes_every_element(monkeypatch):
    """One fused plan over growing lengths (what graph replay does), outputs and workspace starting as NaN."""
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real_empty_like(t, **kw).fill_(math.nan))
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: real_empty(*a, **kw).fill_(math.nan))
    lengths = seqlens(5, 0)
    q, k, v, table = inputs(2, 4, 1, 2, 32, 64, seqlens(64, 64), torch.bfloat16, page_size=16, seed=3)
    fused, _ = plans(q, k, v, lengths, table, 3)
    for grown in ((5, 0), (40, 17), (64, 63)):
        lengths.copy_(seqlens(*grown))
        q.copy_(torch.randn_like(q))
        o, lse = fused(q, k, v, lengths, table)
        assert_matches_reference(o, lse, q, k, v, lengths, table)
        assert not fused.counters.any()


def test_fused_combine_only_through_the_plan_config(monkeypatch):
    """fa2.decode's default is the two-launch path; FUSED_COMBINE turns it on for plans made afterwards; one
    split never needs counters."""
    lengths = seqlens(20, 9)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 32, lengths, torch.float16, page_size=16)
    _PLANS.clear()
    default = decoding._plan(q, k, v, lengths, table, None, 3, None, None)
    assert decoding.FUSED_COMBINE is False and default.counters is None and default.combine is not None
    assert "fused_combine" not in decoding.GPU_CONFIG
    monkeypatch.setattr(decoding, "FUSED_COMBINE", True)
    _PLANS.clear()
    try:
        plan = decoding._plan(q, k, v, lengths, table, None, 3, None, None)
        assert plan.counters is not None and plan.combine is None
        o, lse = fa2.decode(q, k, v, lengths, table, num_splits=3, return_lse=True)
        assert_matches_reference(o, lse, q, k, v, lengths, table)
        assert decoding._plan(q, k, v, lengths, table, None, 1, None, None).counters is None
    finally:
        _PLANS.clear()                              # no fused plan outlives the patch
    single = DecodePlan(q, k, v, lengths, table, 32 ** -0.5, 1, -1, 0.0, config=dict(fused_combine=True))
    assert single.counters is None and single.combine is None


def test_chapter_flash_decode_fused():
    lengths = seqlens(150, 91)
    q, k, v, _ = inputs(2, 4, 1, 1, 32, 150, lengths, torch.float16, seed=1)
    for splits in (2, 13):                          # 13 splits of <= 10 tiles: some see no key
        fused = flash_decode(q, k, v, lengths, num_splits=splits, fused_combine=True)
        assert_fused_matches_two_launches(fused, flash_decode(q, k, v, lengths, num_splits=splits))
        assert_matches_reference(*fused, q, k, v, lengths, None)


# ------------------------------------------------------------------------------ programmatic dependent launch

def test_pdl_is_ignored_where_it_cannot_run():
    """config pdl=True is a performance option: where PDL cannot run (the interpreter, GPUs below sm_90) the plan
    launches exactly as without it, and its results are the default plan's, bit for bit."""
    lengths = seqlens(37, 0, 80)
    q, k, v, table = inputs(3, 8, 2, 2, 32, 80, lengths, torch.bfloat16, page_size=16, seed=4)
    for splits, fused in ((3, False), (1, False), (3, True)):
        make = lambda pdl: DecodePlan(q, k, v, lengths, table, 32 ** -0.5, splits, -1, 0.0,
                                      config=dict(pdl=pdl, fused_combine=fused))
        plan, default = make(True), make(False)
        assert plan.pdl == decoding.pdl_supported(q.device) and not default.pdl
        if not plan.pdl:
            assert "launch_pdl" not in plan.split_kv.options and plan.split_kv_scalars[-1] is False
        o, lse = plan(q, k, v, lengths, table)
        assert_matches_reference(o, lse, q, k, v, lengths, table)
        o_d, lse_d = default(q, k, v, lengths, table)
        if not plan.pdl:
            assert torch.equal(o, o_d) and torch.equal(lse, lse_d)


@pytest.mark.parametrize("interpret, device, cc, supported", [
    (False, "cuda", (9, 0), True), (False, "cuda", (10, 0), True), (False, "cuda", (12, 0), True),
    (False, "cuda", (8, 9), False), (False, "cuda", (8, 0), False), (False, "cuda", (7, 5), False),
    (True, "cuda", (9, 0), False), (False, "cpu", (9, 0), False)])
def test_pdl_supported_needs_sm90_and_compiled_kernels(monkeypatch, interpret, device, cc, supported):
    monkeypatch.setattr(runtime, "INTERPRET", interpret)
    monkeypatch.setattr(decoding.validate, "capability", lambda index: cc)
    assert decoding.pdl_supported(torch.device(device, 0) if device == "cuda" else torch.device(device)) is supported


def test_pdl_launches_only_when_on_and_supported(monkeypatch):
    """The plan passes launch_pdl=True (and USE_PDL=True, the kernels' last argument) to its kernels only when
    config pdl is on -- True, or "auto" (the default) and the plan has at least PDL_MIN_SPLITS splits -- and
    pdl_supported(q's device) (patched here: no sm_90 GPU on the CPU); the module default PDL applies to plans
    made after it is set."""
    lengths = seqlens(20, 9)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 32, lengths, torch.float16, page_size=16)
    asked = []
    supported = lambda device: asked.append(device) or True
    make = lambda splits=8, **config: DecodePlan(q, k, v, lengths, table, 32 ** -0.5, splits, -1, 0.0,
                                                 config=config)

    def launches(plan):
        return [(lean.options.get("launch_pdl", False), scalars[-1])
                for lean, scalars in ((plan.split_kv, plan.split_kv_scalars), (plan.combine, plan.combine_scalars))]
    assert decoding.PDL == "auto" and decoding.PDL_MIN_SPLITS == 8
    assert "pdl" not in decoding.GPU_CONFIG and "pdl" not in decoding.CPU_CONFIG
    here = decoding.pdl_supported(q.device)         # False on the CPU, True on an sm_90+ GPU
    assert launches(make()) == [(here, here)] * 2 and launches(make(pdl=True)) == [(here, here)] * 2
    monkeypatch.setattr(decoding, "pdl_supported", supported)
    plan = make(pdl=True)                             # only inspected: the interpreter cannot run griddepcontrol
    assert plan.pdl and asked == [q.device] and launches(plan) == [(True, True)] * 2
    assert launches(make()) == [(True, True)] * 2     # default "auto": 8 splits, PDL
    assert not make(7).pdl and launches(make(7)) == [(False, False)] * 2       # 7 splits: none
    assert launches(make(3, pdl=True)) == [(True, True)] * 2
    assert not make(pdl=False).pdl and launches(make(pdl=False)) == [(False, False)] * 2
    forced = make(1, pdl=True)
    assert forced.combine is None and forced.split_kv.options["launch_pdl"] and forced.split_kv_scalars[-1]
    default = make(1)                                 # one split, one launch: no PDL
    assert not default.pdl and "launch_pdl" not in default.split_kv.options and not default.split_kv_scalars[-1]
    for wrong in ("always", "splits", 2, None):
        with pytest.raises(ValueError, match="pdl"):
            make(pdl=wrong)
    monkeypatch.setattr(decoding, "PDL", False)
    _PLANS.clear()
    try:
        assert not decoding._plan(q, k, v, lengths, table, None, 8, None, None).pdl
        monkeypatch.setattr(decoding, "PDL", True)
        _PLANS.clear()
        assert decoding._plan(q, k, v, lengths, table, None, 1, None, None).pdl
    finally:
        _PLANS.clear()                              # no plan made under the patch outlives it
    monkeypatch.setattr(decoding, "pdl_supported", lambda device: False)
    assert launches(make(pdl=True)) == [(False, False)] * 2


# Compiles chapter 9's kernels for sm_90 without a GPU (Triton's AOT path; ptxas ships with Triton) and prints,
# per kernel and USE_PDL, what its PTX holds. Run in a subprocess with TRITON_INTERPRET=0: under the interpreter
# @triton.jit gives interpreted functions, which Triton's compiler does not take.
AOT_SCRIPT = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from fa2 import runtime
from fa2.chapters.flash_decoding import _combine_kernel, _split_kv_kernel
assert not runtime.INTERPRET
if not hasattr(triton.language.extra.cuda, "gdc_wait"):
    sys.exit(print("AOT-SKIP this Triton has no tl.extra.cuda.gdc_wait"))

def compile_ptx(fn, constexprs, pointers, options):
    scalar = lambda name: "fp32" if name in ("qk_scale", "softcap_log2e") else "i32"
    signature = {name: "constexpr" if name in constexprs else pointers.get(name, scalar(name))
                 for name in fn.arg_names}
    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=constexprs),
                            target=GPUTarget("cuda", 90, 32), options=options)
    return kernel.asm["ptx"], kernel.metadata.launch_pdl

def first(ptx, pattern):
    lines = ptx.splitlines()
    return next((i for i, line in enumerate(lines) if re.search(pattern, line)), None)

split_pointers = dict(Q="*bf16", K="*bf16", V="*bf16", SEQLENS="*i32", BLOCK_TABLE="*i32", O="*fp32",
                      LSE="*fp32", O_FINAL="*bf16", LSE_FINAL="*fp32", COUNTERS="*i32")
split = dict(PAGE_SIZE=0, HAS_SEQLENS=True, HAS_WINDOW=False, HAS_SOFTCAP=False, SPLIT=True,
             FUSED_COMBINE=False, BLOCK_M=16, BLOCK_N=64, D=128, HEAD_DIM=128, SPLITS=1, INTERLEAVED=False)
cases = {"split": (_split_kv_kernel, split, split_pointers, 3),
         "split_paged": (_split_kv_kernel, dict(split, PAGE_SIZE=16), split_pointers, 5),
         "split_fused": (_split_kv_kernel, dict(split, FUSED_COMBINE=True, SPLITS=8), split_pointers, 3),
         "combine": (_combine_kernel, dict(SPLITS=16, D=128, HEAD_DIM=128),
                     dict(O_PART="*fp32", LSE_PART="*fp32", O="*bf16", LSE="*fp32"), 1)}
report = {}
for name, (fn, constexprs, pointers, stages) in cases.items():
    for pdl in (True, False) if name in ("split", "combine") else (True,):
        ptx, launch_pdl = compile_ptx(fn, dict(constexprs, USE_PDL=pdl), pointers,
                                      dict(num_warps=4, num_stages=stages, launch_pdl=pdl))
        report[f"{name}-{pdl}"] = dict(
            launch_pdl=launch_pdl, wait=first(ptx, r"griddepcontrol\.wait"),
            launch_dependents=first(ptx, r"griddepcontrol\.launch_dependents"),
            first_global=first(ptx, r"\b(ld\.global|cp\.async|st\.global|atom\.global|red\.global)"))
print("AOT " + json.dumps(report))
"""


def test_pdl_kernels_compile_for_sm90_with_griddepcontrol(tmp_path):
    """USE_PDL=True compiled for sm_90 (no GPU needed): griddepcontrol.wait before the first global memory
    access of each kernel, launch_dependents in both; USE_PDL=False: neither instruction."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, TRITON_INTERPRET="0", TRITON_CACHE_DIR=str(tmp_path),   # compiled here, every time
               PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", AOT_SCRIPT], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    if "AOT-SKIP" in done.stdout:
        pytest.skip(done.stdout.split("AOT-SKIP", 1)[1].strip())
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("AOT "))[4:])
    for name, found in report.items():
        kernel, pdl = name.rsplit("-", 1)
        if pdl == "True":
            assert found["launch_pdl"] is True, name
            assert found["wait"] is not None and found["launch_dependents"] is not None, name
            assert found["first_global"] is not None and found["wait"] < found["first_global"], name
            assert found["wait"] < found["launch_dependents"], name
        else:
            assert found["launch_pdl"] is False and found["wait"] is None and found["launch_dependents"] is None
    assert set(report) == {"split-True", "split-False", "split_paged-True", "split_fused-True", "combine-True",
                           "combine-False"}


def test_torch_compile_fullgraph():
    lengths = seqlens(30, 7)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 32, lengths, torch.bfloat16, page_size=16)
    step = lambda q, k, v, n, t: fa2.decode(q, k, v, n, t, return_lse=True)
    o, lse = torch.compile(step, backend="aot_eager", fullgraph=True)(q, k, v, lengths, table)
    assert_matches_reference(o, lse, q, k, v, lengths, table)


def test_num_splits_heuristic():
    slots = 132 * 2                                    # an H200 at two programs per SM
    assert num_splits_heuristic(32 * 8, 2048, slots) == 1          # the grid already fills the GPU
    assert num_splits_heuristic(8, 64, slots) == 32                # B=1, 8 KV heads: 256 of 264 slots
    assert num_splits_heuristic(8, 2048, slots) == 29              # 232 slots: within 85 % of the best
    assert num_splits_heuristic(8, 3, slots) == 3                  # never more splits than key tiles
    assert num_splits_heuristic(1, 64, 1024, max_splits=16) == 16
    for programs, tiles in ((1, 1), (8, 130), (64, 7), (100, 1000)):
        splits = num_splits_heuristic(programs, tiles, slots)
        assert 1 <= splits <= max(1, min(tiles, 128))


def test_split_count_comes_from_shapes_only():
    q = torch.zeros(1, 8, 1, 128, dtype=torch.float16, device=DEVICE)
    k = torch.zeros(1, 1, 256, 128, dtype=torch.float16, device=DEVICE)
    assert choose_num_splits(q, k) == choose_num_splits(q.clone(), k.clone()) >= 2


def _good():
    lengths = seqlens(20, 9)
    q, k, v, table = inputs(2, 4, 2, 1, 32, 32, lengths, torch.float16, page_size=16)
    return dict(q=q, k_cache=k, v_cache=v, cache_seqlens=lengths, block_table=table)


def _with(**changes):
    """Good inputs with some replaced: a callable change gets the good inputs and returns the bad value."""
    good = _good()
    return {name: change(good) if callable(change) else change for name, change in {**good, **changes}.items()}


@pytest.mark.parametrize("changes, exc, match", [
    (dict(q=lambda g: g["q"].float()), TypeError, "q must be float16"),
    (dict(k_cache=lambda g: g["k_cache"].bfloat16()), TypeError, "k_cache is torch.bfloat16"),
    (dict(v_cache=lambda g: g["v_cache"][:, :8]), ValueError, "v_cache must have k_cache's shape"),
    (dict(q=lambda g: g["q"][0]), ValueError, "q must be 4-D"),
    (dict(q=lambda g: g["q"].tolist()), TypeError, "q must be a torch.Tensor"),
    (dict(q=lambda g: g["q"].expand(2, 4, 17, 32)), ValueError, "at most 16"),
    (dict(q=lambda g: g["q"][:, :3]), ValueError, "heads are not a multiple"),
    (dict(q=lambda g: g["q"][..., :16]), ValueError, "head dim"),
    (dict(cache_seqlens=lambda g: g["cache_seqlens"].long()), TypeError, "cache_seqlens must be int32"),
    (dict(cache_seqlens=lambda g: g["cache_seqlens"][:1]), ValueError, "cache_seqlens must have shape"),
    (dict(block_table=lambda g: g["block_table"].long()), TypeError, "block_table must be int32"),
    (dict(block_table=lambda g: g["block_table"][0]), ValueError, "block_table must be"),
    (dict(block_table=lambda g: g["block_table"][:1]), ValueError, "block_table must have shape"),
    (dict(k_cache=lambda g: g["k_cache"][:, :12], v_cache=lambda g: g["v_cache"][:, :12]), ValueError,
     "page_size"),
    (dict(block_table=None), ValueError, "k_cache has batch"),
], ids=["q-fp32", "k-dtype", "v-shape", "q-3d", "q-list", "nq-17", "gqa", "headdim", "seqlens-int64",
        "seqlens-shape", "table-int64", "table-1d", "table-batch", "page-12", "paged-without-table"])
def test_bad_input_raises_naming_the_argument(changes, exc, match):
    with pytest.raises(exc, match=match):
        fa2.decode(**_with(**changes))


@pytest.mark.parametrize("flag, value, exc", [
    ("scale", float("nan"), TypeError), ("num_splits", 0, ValueError), ("num_splits", 129, ValueError),
    ("num_splits", 2.0, ValueError), ("window", (3,), ValueError), ("window", (-2, 0), ValueError),
    ("softcap", -1.0, TypeError)])
def test_bad_flags_raise_naming_the_flag(flag, value, exc):
    with pytest.raises(exc, match=flag):
        fa2.decode(**_good(), **{flag: value})


def test_inputs_that_need_grad_raise():
    good = _good()
    good["q"].requires_grad_(True)
    with pytest.raises(NotImplementedError, match="forward-only"):
        fa2.decode(**good)


# ------------------------------------------------------------------------------------------------ GPU only

def graph_inputs(page_size):
    """q, k, v, block table (full caches of 4096 keys) and cache_seqlens of the CUDA graph replay tests."""
    capacity = 4096
    q, k, v, table = inputs(4, 32, 8, 1, 128, capacity, seqlens(*[capacity] * 4), torch.bfloat16, page_size)
    return q, k, v, table, seqlens(1, 700, 2500, 4096)


def graph_replays(step, q, lengths, grown_lengths=((1, 700, 2500, 4096), (2, 1500, 3001, 4096),
                                                   (1000, 4000, 4095, 4096))):
    """Capture `step()` in a CUDA graph (after one call outside it: compile and plan), then replay it with each of
    `grown_lengths` as cache_seqlens and a new q; yields the captured outputs after each replay."""
    step()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for grown in grown_lengths:
        lengths.copy_(seqlens(*grown))
        q.copy_(torch.randn_like(q))
        graph.replay()
        torch.cuda.synchronize()
        yield out


@requires_gpu
@pytest.mark.parametrize("pdl", [False, True], ids=["default", "pdl"])
@pytest.mark.parametrize("page_size", [None, 16, 256], ids=["contiguous", "paged16", "paged256"])
def test_cuda_graph_replay_follows_the_lengths(page_size, pdl, monkeypatch):
    """Capture one decode step, then replay it with longer cache_seqlens and a new q: the reference agrees.
    pdl: fa2.decode's plans launch with PDL (decoding.PDL; on sm_90+ the graph keeps programmatic edges)."""
    monkeypatch.setattr(decoding, "PDL", pdl)
    monkeypatch.setattr(decoding, "_PLANS", {})       # this test's plans only, dropped with the patch
    q, k, v, table, lengths = graph_inputs(page_size)
    for o, lse in graph_replays(lambda: fa2.decode(q, k, v, lengths, table, return_lse=True), q, lengths):
        assert_matches_reference(o, lse, q, k, v, lengths, table)
    assert decoding._plan(q, k, v, lengths, table, None, None, None, None).pdl == (
        pdl and decoding.pdl_supported(q.device))


@requires_gpu
@pytest.mark.parametrize("page_size", [None, 16, 256], ids=["contiguous", "paged16", "paged256"])
@pytest.mark.parametrize("Nq", [1, 4, 16])
def test_family_shapes(page_size, Nq):
    """The benchmark family's heads (32 query, 8 KV, D 128), bf16, ragged lengths up to 16k."""
    lengths = seqlens(1, 777, 8192, 16384)
    q, k, v, table = inputs(4, 32, 8, Nq, 128, 16384, lengths, torch.bfloat16, page_size)
    o, lse = fa2.decode(q, k, v, lengths, table, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, table)


@requires_gpu
@pytest.mark.parametrize("D", [64, 80, 96, 256])
def test_head_dims_on_gpu(D):
    lengths = seqlens(3000, 129)
    q, k, v, table = inputs(2, 16, 2, 2, D, 4096, lengths, torch.float16, 64)
    for splits in (None, 1):
        o, lse = fa2.decode(q, k, v, lengths, table, num_splits=splits, return_lse=True)
        assert_matches_reference(o, lse, q, k, v, lengths, table)


@requires_gpu
def test_offsets_past_two_to_the_31():
    """A paged cache of 2.2e9 elements per tensor: pages at the end need 64-bit offsets."""
    page_size, H_KV, D = 256, 8, 128
    pages = 2**31 // (page_size * H_KV * D) + 8
    k = torch.zeros(pages, page_size, H_KV, D, dtype=torch.bfloat16, device="cuda")
    v = torch.zeros_like(k)
    table = torch.arange(pages - 4, pages, dtype=torch.int32, device="cuda")[None]    # the last 4 pages
    gen = torch.Generator("cuda").manual_seed(0)
    k[-4:] = torch.randn(4, page_size, H_KV, D, device="cuda", generator=gen).to(torch.bfloat16)
    v[-4:] = torch.randn(4, page_size, H_KV, D, device="cuda", generator=gen).to(torch.bfloat16)
    q = torch.randn(1, 32, 1, D, device="cuda", generator=gen).to(torch.bfloat16)
    lengths = seqlens(1000)
    o, lse = fa2.decode(q, k, v, lengths, table, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, table)


@requires_gpu
def test_torch_compile_inductor_on_gpu():
    lengths = seqlens(3000, 17)
    q, k, v, table = inputs(2, 32, 8, 1, 128, 4096, lengths, torch.bfloat16, 16)
    step = torch.compile(lambda q, k, v, n, t: fa2.decode(q, k, v, n, t, return_lse=True), fullgraph=True)
    o, lse = step(q, k, v, lengths, table)
    assert_matches_reference(o, lse, q, k, v, lengths, table)


@requires_gpu
@pytest.mark.parametrize("page_size", [None, 16, 256], ids=["contiguous", "paged16", "paged256"])
def test_fused_combine_cuda_graph_replay_follows_the_lengths(page_size):
    """The fused combine captured in a CUDA graph, replayed with longer lengths and a new q: the reference
    agrees, the counters are back at zero after every replay."""
    q, k, v, table, lengths = graph_inputs(page_size)
    fused, two = plans(q, k, v, lengths, table, 16)
    for o, lse in graph_replays(lambda: fused(q, k, v, lengths, table), q, lengths):
        assert_matches_reference(o, lse, q, k, v, lengths, table)
        assert_fused_matches_two_launches((o, lse), two(q, k, v, lengths, table))
        assert not fused.counters.any()


@requires_gpu
@pytest.mark.parametrize("B, page_size", [(1, None), (1, 16), (8, 256)], ids=["B1", "B1-paged16", "B8-paged256"])
def test_fused_combine_many_calls_agree(B, page_size):
    """Memory ordering, probed: 300 back-to-back fused calls (the benchmark's B=1 shape, the heuristic's
    split count and each of 8 and 64 splits) each agree with the two-launch result. A last split that read a
    partial before its writer's stores landed would show as a mismatch in some call."""
    lengths = torch.randint(1, 8193, (B,), dtype=torch.int32, device=DEVICE)
    q, k, v, table = inputs(B, 32, 8, 1, 128, 8192, lengths, torch.bfloat16, page_size)
    for splits in (None, 8, 64):
        fused, two = plans(q, k, v, lengths, table, splits)
        expected = two(q, k, v, lengths, table)
        outs = [fused(q, k, v, lengths, table) for _ in range(300)]
        torch.cuda.synchronize()
        assert fused.num_splits > 1 and not fused.counters.any()
        for o, lse in outs:
            assert_fused_matches_two_launches((o, lse), expected)
        assert_matches_reference(*outs[-1], q, k, v, lengths, table)


@requires_gpu
@pytest.mark.parametrize("B, page_size", [(1, None), (1, 16), (8, 256)], ids=["B1", "B1-paged16", "B8-paged256"])
def test_pdl_back_to_back_calls_agree(B, page_size):
    """Memory ordering with PDL, probed: 300 back-to-back calls of a pdl plan over four rotating q's, each
    compared with the default plan's result for its q. The combine reading partials before its split kernel's
    stores landed, or the next split kernel overwriting the (reused) workspace while the combine still reads
    it, shows as a mismatch; so does a split kernel that reads q before the copy that wrote it (second loop).
    The heuristic's split count and 8 and 64 splits, and the fused combine with PDL."""
    lengths = torch.randint(1, 8193, (B,), dtype=torch.int32, device=DEVICE)
    q, k, v, table = inputs(B, 32, 8, 1, 128, 8192, lengths, torch.bfloat16, page_size)
    qs = [torch.randn_like(q) for _ in range(4)]
    for splits, fused in ((None, False), (8, False), (64, False), (None, True)):
        make = lambda **config: DecodePlan(q, k, v, lengths, table, 128 ** -0.5, splits, -1, 0.0, config=config)
        plan, default = make(pdl=True, fused_combine=fused), make()
        assert plan.pdl == decoding.pdl_supported(q.device)
        if plan.pdl:
            assert plan.split_kv.options["launch_pdl"] and plan.split_kv_scalars[-1] is True
        expected = [default(x, k, v, lengths, table) for x in qs]
        outs = [plan(qs[i % 4], k, v, lengths, table) for i in range(300)]
        torch.cuda.synchronize()
        for i, out in enumerate(outs):
            assert_fused_matches_two_launches(out, expected[i % 4])
        copied = []
        for i in range(300):
            q.copy_(qs[i % 4])                        # a kernel that writes q, right before the split kernel
            copied.append(plan(q, k, v, lengths, table))
        torch.cuda.synchronize()
        for i, out in enumerate(copied):
            assert_fused_matches_two_launches(out, expected[i % 4])
        assert plan.counters is None or not plan.counters.any()
        assert_matches_reference(*outs[-1], qs[3], k, v, lengths, table)     # call 299 used qs[3]


def test_few_warps_rule_only_where_it_was_measured():
    """FEW_WARPS_CONFIG replaces GPU_CONFIG on an sm_90 GPU for calls with cache_seqlens on contiguous caches of D
    128 with one tile of packed rows, FEW_WARPS_MIN_KEYS of capacity and FEW_WARPS_MIN_SPLITS splits; change any
    one of them and it does not."""
    base = dict(capability=(9, 0), paged=False, head_dim=128, packed_rows=4, capacity=decoding.FEW_WARPS_MIN_KEYS,
                num_splits=decoding.FEW_WARPS_MIN_SPLITS)
    assert decoding.few_warps(**base)
    for change in (dict(capability=None), dict(capability=(8, 0)), dict(capability=(10, 0)), dict(paged=True),
                   dict(has_seqlens=False),
                   dict(head_dim=64), dict(head_dim=256), dict(packed_rows=17),
                   dict(capacity=decoding.FEW_WARPS_MIN_KEYS - 1), dict(num_splits=decoding.FEW_WARPS_MIN_SPLITS - 1)):
        assert not decoding.few_warps(**dict(base, **change)), change


def test_plan_takes_few_warps_where_the_rule_says_and_matches_fp64(monkeypatch):
    """On a pretend sm_90 GPU (GPU_CONFIG's tiles, 132 SMs) a contiguous 4k-key cache of one row and KV head with D
    128 gets FEW_WARPS_CONFIG at the split count chosen for GPU_CONFIG's 64-key tiles, a paged one GPU_CONFIG; both
    plans run (the interpreter runs 32-key tiles) and match fp64 with ragged lengths and NaN past them. A config
    with tiles of its own is taken as given; one with only the combine or PDL keys keeps the rule's tiles; a plan
    for calls without cache_seqlens keeps GPU_CONFIG."""
    monkeypatch.setattr(decoding, "_capability", lambda device: (9, 0))
    monkeypatch.setattr(decoding, "_config", lambda q, paged=False: dict(decoding.GPU_CONFIG))
    monkeypatch.setattr(decoding, "sm_count", lambda device: 132)
    N = decoding.FEW_WARPS_MIN_KEYS
    lengths = seqlens(N - 5)
    q, k, v, _ = inputs(1, 4, 1, 1, 128, N, lengths, torch.bfloat16)
    cfg, splits = decoding._launch_config(q, k, None)
    assert cfg == decoding.FEW_WARPS_CONFIG and splits == choose_num_splits(q, k, None, 64)
    assert splits >= decoding.FEW_WARPS_MIN_SPLITS
    qp, kp, vp, table = inputs(1, 4, 1, 1, 128, N, lengths, torch.bfloat16, page_size=256)
    assert decoding._launch_config(qp, kp, table)[0] == decoding.GPU_CONFIG
    given = dict(block_n=64, num_warps=4, num_stages=3)
    plan = DecodePlan(q, k, v, lengths, None, 128 ** -0.5, None, -1, 0.0)
    assert plan.num_splits == splits and plan.split_kv.options["num_warps"] == 2
    assert DecodePlan(q, k, v, lengths, None, 128 ** -0.5, None, -1, 0.0,
                      config=given).split_kv.options["num_warps"] == 4
    assert DecodePlan(q, k, v, lengths, None, 128 ** -0.5, None, -1, 0.0,
                      config=dict(pdl=False)).split_kv.options["num_warps"] == 2
    full = DecodePlan(q, k, v, None, None, 128 ** -0.5, None, -1, 0.0)     # no lengths: full rows
    assert full.split_kv.options["num_warps"] == 4 and full.num_splits == splits
    for args in ((q, k, v, lengths, None), (qp, kp, vp, lengths, table)):
        o, lse = DecodePlan(*args, 128 ** -0.5, None, -1, 0.0)(*args)
        assert_matches_reference(o, lse, *args)


@requires_gpu
@pytest.mark.parametrize("Nq", [1, 4])
def test_few_warps_launch_on_gpu_matches_fp64_and_replays(Nq, monkeypatch):
    """B = 1, 32 query heads over 8 KV heads, D 128, a contiguous 8k-key cache: on an sm_90 GPU fa2.decode runs
    FEW_WARPS_CONFIG (two warps), elsewhere GPU_CONFIG; it matches fp64 with NaN past the length, and a captured
    CUDA graph over a full cache follows growing lengths and a new q."""
    monkeypatch.setattr(decoding, "_PLANS", {})
    lengths = seqlens(5000)
    q, k, v, _ = inputs(1, 32, 8, Nq, 128, 8192, lengths, torch.bfloat16)      # NaN past 5000
    plan = decoding._plan(q, k, v, lengths, None, None, None, None, None)
    assert plan.split_kv.options["num_warps"] == (2 if decoding._capability(q.device) == (9, 0) else 4)
    o, lse = fa2.decode(q, k, v, lengths, return_lse=True)
    assert_matches_reference(o, lse, q, k, v, lengths, None)
    q, k, v, _ = inputs(1, 32, 8, Nq, 128, 8192, seqlens(8192), torch.bfloat16, seed=1)   # no poison
    step = lambda: fa2.decode(q, k, v, lengths, return_lse=True)
    for o, lse in graph_replays(step, q, lengths, grown_lengths=((Nq,), (6001,), (8192,))):
        assert_matches_reference(o, lse, q, k, v, lengths, None)
