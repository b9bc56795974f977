"""Runs before any test module imports triton: choose GPU or interpreter once, through fa2.runtime."""
import pytest

import fa2.runtime as runtime

requires_gpu = pytest.mark.skipif(runtime.DEVICE != "cuda", reason="needs a CUDA GPU")


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
