"""The runtime picks the interpreter without a GPU and fixes the interpreter's bf16 tl.dot."""
import os

import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter

import fa2.runtime as runtime
from fa2 import _triton_compat

pytestmark = pytest.mark.skipif(not runtime.INTERPRET, reason="interpreter-only behaviour")


@triton.jit
def _matmul_tile(a_ptr, b_ptr, c_ptr, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    rm, rk, rn = tl.arange(0, M), tl.arange(0, K), tl.arange(0, N)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])  # (M, K)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])  # (K, N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b))


def _rel_err_of_bf16_dot():
    a = torch.randn(32, 64).bfloat16()
    b = torch.randn(64, 16).bfloat16()
    c = torch.full((32, 16), float("nan"))
    _matmul_tile[(1,)](a, b, c, 32, 64, 16)
    ref = a.float() @ b.float()
    return ((c - ref).norm() / ref.norm()).item()


def test_interpreter_selected_without_gpu():
    assert os.environ["TRITON_INTERPRET"] == "1" and runtime.DEVICE == "cpu"


def test_bf16_dot_matches_fp32_after_fix():
    assert _rel_err_of_bf16_dot() < 1e-2


def test_bf16_dot_is_wrong_without_fix(monkeypatch):
    from triton.runtime.interpreter import InterpreterBuilder
    monkeypatch.setattr(InterpreterBuilder, "create_dot", InterpreterBuilder.create_dot.unpatched)
    err = _rel_err_of_bf16_dot()
    assert not err < 0.5  # raw uint16 bits multiplied as integers: wildly wrong (or inf/nan)


def test_bf16_widening_is_exact():
    x = torch.randn(1000).bfloat16()
    widened = _triton_compat.bf16_bits_to_fp32(x.view(torch.int16).numpy().view("uint16"))
    assert torch.equal(torch.from_numpy(widened), x.float())


@triton.jit
def _to_bf16(x_ptr, y_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(y_ptr + r, tl.load(x_ptr + r).to(tl.bfloat16))


def _bf16_cast_mismatch():
    x = torch.randn(4096)
    y = torch.empty(4096, dtype=torch.bfloat16)
    _to_bf16[(1,)](x, y, 4096)
    return (y != x.bfloat16()).float().mean().item()  # torch rounds to nearest-even, like the GPU


def test_fp32_to_bf16_cast_rounds_to_nearest_even():
    assert _bf16_cast_mismatch() == 0.0


def test_fp32_to_bf16_cast_truncates_without_fix(monkeypatch):
    from triton.runtime.interpreter import InterpreterBuilder
    monkeypatch.setattr(InterpreterBuilder, "cast_impl", InterpreterBuilder.cast_impl.unpatched)
    assert _bf16_cast_mismatch() > 0.3  # about half the values round up; truncation never does


@triton.jit
def _copy_through_descriptor(x_ptr, y_ptr, N, D: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    desc = tl.make_tensor_descriptor(x_ptr, shape=[N, D], strides=[D, 1], block_shape=[BLOCK_N, BLOCK_D])
    tile = desc.load([0, 0])                                   # (BLOCK_N, BLOCK_D): zeros past N and D
    rn, rd = tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_D)
    tl.store(y_ptr + rn[:, None] * BLOCK_D + rd[None, :], tile)


def test_descriptor_with_16_byte_rows_of_40_fp16_elements():
    """TMA wants strides that are multiples of 16 bytes: a (N, 40) fp16 tensor's 80-byte rows qualify. Triton
    3.5's interpreter asked for multiples of 16 elements and refused it (on the CPU only); the patch checks
    bytes, as the GPU and Triton 3.6 do."""
    from fa2.chapters.kv_loop import block_d  # noqa: F401  (imports fa2, which installs the patches)
    x = torch.randn(5, 40).half()
    y = torch.full((8, 64), float("nan")).half()
    _copy_through_descriptor[(1,)](x, y, 5, 40, 8, 64)
    expected = torch.zeros(8, 64).half()
    expected[:5, :40] = x
    assert torch.equal(y, expected)


def test_descriptor_stride_patch_is_idempotent_and_keeps_the_original():
    _triton_compat.patch_interpreter_descriptor_strides()
    validate = interpreter.TensorDescHandle.validate
    _triton_compat.patch_interpreter_descriptor_strides()
    assert interpreter.TensorDescHandle.validate is validate


@triton.jit
def _calls_a_helper(x_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    # tl.zeros is a @jit helper of triton.language's own (language/standard.py), whose module sees language.core
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2 + tl.zeros([N], tl.float32))


def _language_state():
    """What every name of triton.language's modules and classes the interpreter binds resolves to (an inherited
    method the interpreter sets back on the class itself resolves to the same function; __annotations__ is made
    by Python on first access)."""
    objects = (tl, tl.core, tl.math, tl.tensor, tl.dtype, tl.core.tensor_descriptor_base)
    return [{name: getattr(o, name) for name in dir(o) if name != "__annotations__"} for o in objects]


@pytest.mark.skipif(not hasattr(interpreter, "_LangPatchScope"),
                    reason="this Triton's interpreter never unbinds triton.language, not even after a launch "
                           "(3.5); nothing is compiled for a GPU beside it (tests/test_gluon.py skips there)")
def test_a_device_function_call_leaves_triton_language_as_it_was():
    """The interpreter binds triton.language's builtins to itself for a @jit helper called from a kernel and, in
    Triton 3.6, never unbinds them: after any kernel that calls a helper, 61 builtins of triton.language.core
    stayed the interpreter's, and compiling a Gluon kernel for a GPU in the same process failed (the AOT
    compile tests of tests/test_gluon.py, whenever another test had run a kernel first)."""
    before = _language_state()
    x = torch.arange(8.0)
    _calls_a_helper[(1,)](x, 8)
    assert torch.equal(x, torch.arange(8.0) * 2)
    after = _language_state()
    changed = [[name for name, value in a.items() if b.get(name) != value] for b, a in zip(before, after)]
    assert changed == [[]] * len(before)
