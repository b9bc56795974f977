"""The bug catalog of chapter 7: every mutant that can show at small shapes fails the project's check for both
kernels, the unmutated kernels pass on the same shapes, and every assertion of the check can fail."""
import math
import sys

import pytest
import torch

from fa2 import runtime
from fa2.chapters import bugs, fast, forward, kv_loop
from fa2.chapters.reference import attention_reference
from fa2.testing import check_attention, check_causal_boundaries, error_bounds, mutant
from test_causal_boundaries import BLOCK, generic, hopper

CAUGHT_ON_CPU = [(name, kernel) for name in bugs.BUGS for kernel in bugs.KERNELS
                 if bugs.has_bug(name, kernel) and bugs.BUGS[name]["case"] is not None]
EVERY_MUTANT = [(name, kernel) for name in {**bugs.BUGS, **bugs.PERF_BUGS} for kernel in bugs.KERNELS
                if bugs.has_bug(name, kernel)]
CASES = [dict(c) for c in sorted({tuple(sorted(bugs.exposing_case(name).items(), key=str))
                                   for name, _ in CAUGHT_ON_CPU}, key=str)]


@pytest.mark.parametrize("kernel", bugs.KERNELS)
def test_unmutated_kernels_pass_every_exposing_case(kernel):
    torch.manual_seed(0)
    for case in CASES:
        check_attention(bugs.attention_fn(bugs.MODULES[kernel], kernel), **case)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")   # the 0/0 mutant
@pytest.mark.parametrize("name,kernel", CAUGHT_ON_CPU, ids=[f"{n}-{k}" for n, k in CAUGHT_ON_CPU])
def test_mutant_fails_the_check(name, kernel):
    torch.manual_seed(0)
    fn = bugs.attention_fn(bugs.mutant_module(name, kernel), kernel)
    with pytest.raises(AssertionError):
        check_attention(fn, **bugs.exposing_case(name))


@pytest.mark.parametrize("name,kernel", EVERY_MUTANT, ids=[f"{n}-{k}" for n, k in EVERY_MUTANT])
def test_every_edit_applies_exactly_once(name, kernel):
    """A kernel edited in chapters 4-6 must not silently drop a mutant: each edit still finds its text once."""
    module = bugs.mutant_module(name, kernel)
    assert module.__name__ in sys.modules and module.__name__ != bugs.MODULES[kernel].__name__


def test_gpu_only_mutants_pass_on_small_shapes():
    """The int32 overflow needs offsets past 2^31 elements: at CPU sizes its mutants are indistinguishable."""
    torch.manual_seed(0)
    for kernel in bugs.KERNELS:
        check_attention(bugs.attention_fn(bugs.mutant_module("int32_offsets", kernel), kernel),
                        **dict(bugs.BASE_CASE, Nq=40, Nk=40))


@pytest.mark.parametrize("name,kernel,ordinary", [
    ("split_boundary_off_by_one", "fast", hopper),
    ("causal_loop_end_off_by_one", "fast", hopper),
    ("causal_loop_end_off_by_one", "generic", generic),
], ids=["split-fast", "loop-end-fast", "loop-end-generic"])
def test_ordinary_residue_test_catches_boundary_mutant(name, kernel, ordinary):
    """tests/test_causal_boundaries.py, run on a boundary mutant instead of the kernel, fails."""
    torch.manual_seed(0)
    with pytest.raises(AssertionError):
        check_causal_boundaries(ordinary(bugs.mutant_module(name, kernel)), BLOCK, BLOCK)


def test_lse_bias_of_one_percent_passed_the_old_tolerance():
    """The LSE check used to be atol=1e-2, rtol=1e-3: a row sum 1 % too large (log 1.01 < 1e-2) passed it."""
    torch.manual_seed(0)
    fn = bugs.attention_fn(bugs.mutant_module("lse_row_sum_biased", "generic"), "generic")
    q, k, v = (torch.randn(1, 2, 32, 16, device=runtime.DEVICE).half() for _ in range(3))
    _, lse = fn(q, k, v, False, None)
    _, ref_lse = attention_reference(q, k, v, return_lse=True)
    torch.testing.assert_close(lse.double(), ref_lse, atol=1e-2, rtol=1e-3)     # the old check: passes
    with pytest.raises(AssertionError, match="lse error"):
        check_attention(fn, **bugs.exposing_case("lse_row_sum_biased"))


# ---------------------------------------------------------------- every assertion of the check can fail

def _reference_answer(q, k, v, causal, scale):
    """The fp64 reference rounded to the input dtype, LSE in fp32: what a perfect kernel returns."""
    o, lse = attention_reference(q, k, v, causal, scale, return_lse=True)
    return o.to(q.dtype), lse.float()


def _nan_row(q, k, v, causal, scale):
    o, lse = _reference_answer(q, k, v, causal, scale)
    o[0, 0, 0] = math.nan
    return o, lse


def _one_element_off(q, k, v, causal, scale):
    o, lse = _reference_answer(q, k, v, causal, scale)
    o[0, 0, 0, 0] += 0.05
    return o, lse


def _all_within_bound_but_shifted(q, k, v, causal, scale):
    """Every element 70 % of its bound away, all in one direction: a systematic error that only the comparison
    with SDPA's error flags (in bf16, where the bound allows several units of rounding)."""
    o, lse = attention_reference(q, k, v, causal, scale, return_lse=True)
    bound, _ = error_bounds(q, k, v, causal, scale)
    return (o + 0.7 * bound).to(q.dtype), lse.float()


def _lse_off(q, k, v, causal, scale):
    o, lse = _reference_answer(q, k, v, causal, scale)
    return o, lse + 1e-3


def _empty_rows_lse_zero(q, k, v, causal, scale):
    o, lse = _reference_answer(q, k, v, causal, scale)
    return o, torch.where(torch.isneginf(lse), 0.0, lse)


def _wrong_dtype(q, k, v, causal, scale):
    o, lse = _reference_answer(q, k, v, causal, scale)
    return o.float(), lse


@pytest.mark.parametrize("answer,dtype,message", [
    (_reference_answer, torch.float16, None),
    (_wrong_dtype, torch.float16, "output"),
    (_nan_row, torch.float16, "NaN"),
    (_one_element_off, torch.float16, "derived bound"),
    (_all_within_bound_but_shifted, torch.bfloat16, "twice SDPA"),
    (_lse_off, torch.float16, "lse error"),
    (_empty_rows_lse_zero, torch.float16, "no visible key"),
], ids=["perfect", "dtype", "nan", "bound", "sdpa", "lse", "empty-lse"])
def test_every_assertion_of_the_check_can_fail(answer, dtype, message):
    torch.manual_seed(0)
    run = lambda: check_attention(answer, 1, 2, 1, 40, 24, 32, dtype, causal=True)
    if message is None:
        run()
    else:
        with pytest.raises(AssertionError, match=message):
            run()


# ---------------------------------------------------------------- the mutant helper

def test_mutant_imports_point_a_kernel_at_a_mutated_loop():
    loop = mutant(kv_loop, {'tl.where(visible, scores, float("-inf"))': "tl.where(visible, scores, 0.0)"})
    outer = mutant(forward, {}, imports={"fa2.chapters.kv_loop": loop})
    assert outer.attend_kv_tiles is loop.attend_kv_tiles and forward.attend_kv_tiles is kv_loop.attend_kv_tiles
    with pytest.raises(ValueError, match="expected once"):
        mutant(fast, {}, imports={"fa2.chapters.forward": loop})
