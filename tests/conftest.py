"""Runs before any test module imports triton: choose GPU or interpreter once, through fa2.runtime."""
from collections import defaultdict

import pytest

import fa2.runtime as runtime

requires_gpu = pytest.mark.skipif(runtime.DEVICE != "cuda", reason="needs a CUDA GPU")

# CI runs every module on the pinned Triton and, with `--kernels-only`, KERNEL_MODULES on the oldest and newest
# Triton too: the modules that launch fa2's kernels or reach into Triton (launchers, configs, timers, runtime).
# There each parametrized test runs COMPAT_CASES of its cases, the first and the last of its list: what differs
# between Triton versions is the launch path, the interpreter and the API, which every case of a test goes through
# alike; the pinned run keeps every case. PINNED_ONLY builds on them or on no Triton at all: the benchmark and probe plumbing, the integrations over the
# public API, the notebooks, the book, docs, packaging and CI. Every module is in one set (tests/test_workflows.py).
KERNEL_MODULES = {
    "test_api", "test_autotune", "test_causal_boundaries", "test_decode", "test_flash_attn", "test_gluon",
    "test_gluon_dispatch", "test_gluon_rungs", "test_gpu", "test_headdim", "test_interleaved", "test_mutants",
    "test_notebook", "test_plan", "test_runtime", "test_scaffold_grid", "test_timing", "test_triton_compat",
    "test_varlen", "test_varlen_configs",
}
PINNED_ONLY = {
    "test_bench", "test_bench_decode", "test_bench_dropin", "test_book_ext", "test_book_html", "test_export",
    "test_gpu_readme", "test_gpu_scripts", "test_intro_plan", "test_notebook_header", "test_packaging", "test_profile",
    "test_readme_numbers", "test_release", "test_roofline", "test_transformers", "test_workflows",
}


def pytest_addoption(parser):
    parser.addoption("--kernels-only", action="store_true",
                     help="collect only conftest.KERNEL_MODULES (CI on the oldest and newest Triton)")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("--kernels-only") and collection_path.suffix in (".py", ".ipynb"):
        return collection_path.stem not in KERNEL_MODULES
    return None


COMPAT_CASES = 2


def compat_cases(n: int) -> list[int]:
    """The indices of the cases a test of n cases keeps under --kernels-only: all of them up to COMPAT_CASES,
    else COMPAT_CASES spread evenly from the first to the last (with 2, the first and the last)."""
    if n <= COMPAT_CASES:
        return list(range(n))
    return sorted({round(i * (n - 1) / (COMPAT_CASES - 1)) for i in range(COMPAT_CASES)})


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--kernels-only"):
        return
    cases = defaultdict(list)                  # (module, test function) -> its parametrized items, in order
    for item in items:
        cases[(item.path, getattr(item, "originalname", item.name))].append(item)
    kept = {id(group[i]) for group in cases.values() for i in compat_cases(len(group))}
    deselected = [item for item in items if id(item) not in kept]
    if deselected:
        items[:] = [item for item in items if id(item) in kept]
        config.hook.pytest_deselected(items=deselected)


@pytest.fixture
def device():
    return runtime.DEVICE


@pytest.fixture
def allocations(monkeypatch):
    """Fail the test if anything pads, copies (`.contiguous()`) or clones a tensor; record the shape of every
    `torch.empty` / `torch.empty_like` allocation in the list it returns (the no-copy tests of the head dims)."""
    import torch

    fail = lambda *a, **kw: pytest.fail("an input was copied")
    monkeypatch.setattr(torch.nn.functional, "pad", fail)
    monkeypatch.setattr(torch.Tensor, "contiguous", fail)
    monkeypatch.setattr(torch.Tensor, "clone", fail)
    allocated = []
    real_empty, real_empty_like = torch.empty, torch.empty_like
    shape_of = lambda a: tuple(a[0]) if len(a) == 1 and isinstance(a[0], (tuple, list, torch.Size)) else a
    monkeypatch.setattr(torch, "empty_like",
                        lambda t, **kw: allocated.append(tuple(t.shape)) or real_empty_like(t, **kw))
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: allocated.append(shape_of(a)) or real_empty(*a, **kw))
    return allocated
