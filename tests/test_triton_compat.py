"""Triton's internals that fa2/_triton_compat.py relies on, pinned against the installed Triton on the CPU."""
import ast
import inspect
from types import SimpleNamespace

import pytest
import torch
import triton
from triton.runtime.jit import JITFunction

from fa2 import _triton_compat as compat


def _launcher_call_in_jit():
    """The argument list of the `kernel.run(...)` call inside JITFunction.run, as source text."""
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(JITFunction.run)))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and ast.unparse(node.func) == "kernel.run"]
    assert len(calls) == 1, "JITFunction.run no longer makes exactly one kernel.run(...) call"
    return tuple(ast.unparse(arg) for arg in calls[0].args)


def test_jit_passes_the_launcher_arguments_in_the_order_direct_launch_uses():
    """DirectLaunch.direct hard-codes JITFunction.run's order; if this Triton changed it, it must not be pinned."""
    order = _launcher_call_in_jit()
    if compat.direct_launch_allowed(interpret=False, environ={}):
        assert order == compat.LAUNCH_ARGUMENTS
    else:                                   # an unpinned Triton: the public path is used, nothing to pin
        assert not triton.__version__.startswith(compat.PINNED_VERSIONS)


def test_direct_launch_passes_grid_stream_metadata_then_the_kernel_arguments(monkeypatch):
    calls = []
    compiled = SimpleNamespace(run=lambda *args: calls.append(args), function="fn", packed_metadata="meta")
    launch = compat.DirectLaunch(kernel=None, grid=(3, 5, 1), options={}, device=0)
    launch.compiled = compiled
    monkeypatch.setattr(compat, "_current_stream", lambda device: "stream")
    launch.direct("q", "k", 7)
    # grid_0..2, stream, kernel.function, kernel.packed_metadata, launch_metadata, enter/exit hooks, *args
    assert calls == [(3, 5, 1, "stream", "fn", "meta", None, None, None, "q", "k", 7)]
    assert len(compat.LAUNCH_ARGUMENTS) == 10


def test_direct_launch_only_on_pinned_versions_and_never_when_switched_off():
    assert compat.direct_launch_allowed("3.6.0", {}, interpret=False)
    assert not compat.direct_launch_allowed("3.9.0", {}, interpret=False)      # not pinned: public path
    assert not compat.direct_launch_allowed("3.6.0", {"FA2_DIRECT_LAUNCH": "0"}, interpret=False)
    assert not compat.direct_launch_allowed("3.6.0", {}, interpret=True)


def test_importing_fa2_on_a_gpu_machine_sets_no_triton_allocator():
    """`import fa2` must not change process-wide Triton state on a GPU; the first device-descriptor launch may.
    A subprocess pretends to have a GPU (so fa2 picks the GPU path) and records triton.set_allocator calls."""
    import os
    import subprocess
    import sys
    code = """
import torch, triton
torch.cuda.is_available = lambda: True
calls = []
triton.set_allocator = lambda fn: calls.append(fn)
import fa2, fa2.ladder, fa2.chapters.fast
assert fa2.runtime.DEVICE == "cuda" and not fa2.runtime.INTERPRET
assert calls == [], "set_allocator was called at import"
fa2._triton_compat.ensure_tma_allocator()
assert len(calls) == 1
fa2._triton_compat.ensure_tma_allocator()
assert len(calls) == 1
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_encoded_descriptor_launch_passes_what_tritons_wrapper_would(monkeypatch):
    """EncodedDescriptors reaches past Triton's descriptor wrapper (triton.backends.nvidia.driver); with the
    installed Triton, its arguments to the wrapped launch function must equal the wrapper's, call for call."""
    from types import SimpleNamespace

    from triton.backends.nvidia import driver as nvidia_driver

    import triton
    if not triton.__version__.startswith(compat.PINNED_VERSIONS):    # unpinned: the plain launch path only
        assert compat.EncodedDescriptors.build(None, []) is None
        pytest.skip(f"triton {triton.__version__} is not pinned for encoded descriptors")
    _triton_compat, EncodedDescriptors, HostDescriptor = compat, compat.EncodedDescriptors, compat.HostDescriptor
    encode = lambda desc, meta: [("map", desc.base.data_ptr(), meta["swizzle"]), *desc.shape, *desc.strides]
    monkeypatch.setattr(nvidia_driver, "make_tensordesc_arg", encode)
    calls = []
    signature = {i: "tensordesc<fp16[1,1,64,32]>" for i in range(4)} | {4: "*fp32", 5: "i32", 6: "constexpr"}
    metadata = [dict(swizzle=128 + i) for i in range(4)]
    wrapper = nvidia_driver.wrap_handle_tensordesc(lambda *args: calls.append(args), signature, metadata)
    launcher = SimpleNamespace(launch=wrapper, global_scratch_size=0, profile_scratch_size=0,
                               launch_cooperative_grid=False, launch_pdl=False)
    compiled = SimpleNamespace(run=launcher, packed_metadata=("packed",), function=1234)
    tensors = [torch.empty(1, 2, 64, 32, dtype=torch.float16) for _ in range(4)]
    layouts = [([1, 2, 64, 32], [4096, 2048, 32, 1], [1, 1, 64, 32], "zero")] * 4
    monkeypatch.setattr(_triton_compat, "direct_launch_allowed", lambda: True)   # as on a GPU with this Triton
    encoded = EncodedDescriptors.build(compiled, layouts)
    monkeypatch.setattr(_triton_compat, "_current_stream", lambda device: 99)
    lean = SimpleNamespace(grid=(1, 2, 1), device=0, compiled=compiled)      # what launch reads of a LeanLaunch
    assert encoded, "the installed Triton's descriptor wrapper no longer looks as EncodedDescriptors expects"
    lse, scalars = torch.empty(2, 64), (7, True)
    for _ in range(2):                                # miss, then hit: the same arguments both times
        wrapper(1, 2, 1, 99, 1234, False, False, None, None, ("packed",), None, None, None,
                *[HostDescriptor(t, layout) for t, layout in zip(tensors, layouts)], lse, *scalars)
        encoded.launch(lean, tensors, (lse, *scalars))
        assert len(calls) == 2 and calls[0] == calls[1]
        calls.clear()
