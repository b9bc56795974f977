"""Triton's internals that fa2/_triton_compat.py relies on, pinned against the installed Triton on the CPU."""
import ast
import inspect
from types import SimpleNamespace

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
