"""Runs before any test module imports triton: choose GPU or interpreter once, through fa2.runtime."""
import pytest

import fa2.runtime as runtime

requires_gpu = pytest.mark.skipif(runtime.DEVICE != "cuda", reason="needs a CUDA GPU")


@pytest.fixture
def device():
    return runtime.DEVICE
