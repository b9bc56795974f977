"""Every use of Triton's private internals and process-wide Triton state, in one module.

What is here, and what each depends on:

* ``patch_interpreter_bf16`` -- fixes two bf16 bugs of the CPU interpreter (``tl.dot`` on raw bits, fp32->bf16
  casts that truncate). Reaches into ``triton.runtime.interpreter.InterpreterBuilder``; active only under
  ``TRITON_INTERPRET=1``, checked by tests/test_runtime.py on every Triton the CI runs.
  ``patch_interpreter_descriptor_strides`` -- Triton 3.5's interpreter checks tensor-descriptor strides in
  elements where TMA checks bytes; replaces ``TensorDescHandle.validate`` there (3.6+ untouched).
  ``patch_interpreter_device_calls`` -- Triton 3.6's interpreter leaves ``triton.language`` bound to itself after a
  ``@jit`` helper called from a kernel returns; undoes that binding on return (``InterpretedFunction.__call__``).
* ``DirectLaunch`` -- after a kernel's first launch through the JIT, calls the compiled kernel's launcher with
  the argument list in the order ``JITFunction.run`` uses (``LAUNCH_ARGUMENTS``), skipping the JIT's per-call
  binding and specialisation (tens of microseconds). ``EncodedDescriptors`` -- reaches past the launcher's
  tensor-descriptor wrapper to hand it host TMA descriptors encoded once per address.
  Both are enabled only on the Triton versions in ``PINNED_VERSIONS`` (a CPU test pins the argument order and
  the wrapper's layout against the installed Triton; GPU tests run the launches) and only when the environment
  does not set ``FA2_DIRECT_LAUNCH=0``. Elsewhere every launch takes Triton's public path, ``kernel[grid](...)``.
* ``ensure_tma_allocator`` -- device-side tensor descriptors need a global scratch allocator; it is installed
  lazily, the first time a kernel that needs it is launched, so ``import fa2`` changes no Triton state on a GPU.
* ``raise_recompile_limit`` -- lifts dynamo's recompile limit for benchmarks that compile one graph per shape.
"""

import os

import numpy as np
import torch
import triton
import triton.language as tl

from fa2 import runtime

PINNED_VERSIONS = ("3.6.",)          # where DirectLaunch and EncodedDescriptors were checked (CPU + GPU tests)
# the arguments JITFunction.run passes to the compiled kernel's launcher, in order (tests/test_triton_compat.py)
LAUNCH_ARGUMENTS = ("grid_0", "grid_1", "grid_2", "stream", "kernel.function", "kernel.packed_metadata",
                    "launch_metadata", "knobs.runtime.launch_enter_hook", "knobs.runtime.launch_exit_hook",
                    "*bound_args.values()")


def direct_launch_allowed(version=None, environ=None, interpret=None):
    """May launches bypass Triton's JIT? Only on a GPU, on a pinned version, and not when FA2_DIRECT_LAUNCH=0."""
    version = triton.__version__ if version is None else version
    environ = os.environ if environ is None else environ
    interpret = runtime.INTERPRET if interpret is None else interpret
    return (not interpret and environ.get("FA2_DIRECT_LAUNCH", "1") != "0"
            and version.startswith(PINNED_VERSIONS))


# ------------------------------------------------------------------------------- interpreter bf16 fixes

def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    """Exact widening of bf16 values stored as uint16 bits to float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def fp32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 (as uint16 bits) rounding to nearest, ties to even, like the GPU's cvt.rn.bf16.f32."""
    x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return x.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def patch_interpreter_bf16() -> None:
    """Make the interpreter's bf16 `tl.dot` and fp32->bf16 cast behave like the GPU (idempotent)."""
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_fa2_bf16_fix", False):
        return
    unpatched = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16:
            a = interpreter.TensorHandle(bf16_bits_to_fp32(a.data), tl.float32)
        if b.dtype.scalar == tl.bfloat16:
            b = interpreter.TensorHandle(bf16_bits_to_fp32(b.data), tl.float32)
        return unpatched(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._fa2_bf16_fix = True
    create_dot.unpatched = unpatched  # kept so a test can show the bug the patch fixes
    builder.create_dot = create_dot

    unpatched_cast = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interpreter.TensorHandle(fp32_to_bf16_bits(src.data), tl.bfloat16)
        return unpatched_cast(self, src, dst_type)

    cast_impl.unpatched = unpatched_cast
    builder.cast_impl = cast_impl


def patch_interpreter_descriptor_strides() -> None:
    """Make Triton 3.5's interpreter check a tensor descriptor's strides in bytes, as TMA and Triton 3.6 do: it
    asked for strides that are multiples of 16 *elements*, so a (N, 40) fp16 tensor (80-byte rows, which TMA
    takes) failed on the CPU only (idempotent; Triton 3.6 and newer are left alone)."""
    import inspect

    from triton.runtime import interpreter

    handle = getattr(interpreter, "TensorDescHandle", None)
    if handle is None or getattr(handle.validate, "_fa2_byte_strides", False):
        return
    try:
        checks_bytes = "byte_stride" in inspect.getsource(handle.validate)
    except (OSError, TypeError):
        return
    if checks_bytes:
        return

    def validate(self):
        assert self.base.data.item() % 16 == 0, "base must be 16-byte aligned"
        assert len(self.strides) == self.ndim
        assert len(self.block_shape) == self.ndim
        assert self.ndim >= 1, "descriptor cannot be 0 dimensional"
        itemsize = self.base.dtype.element_ty.primitive_bitwidth // 8
        for stride in self.strides[:-1]:
            assert stride.data.item() * itemsize % 16 == 0, "stride must be 16-byte aligned"
        assert self.strides[-1].data.item() == 1, "last dim must be contiguous"

    validate._fa2_byte_strides = True
    validate.unpatched = handle.validate
    handle.validate = validate


def patch_interpreter_device_calls() -> None:
    """Undo, when it returns, the interpreter's binding of triton.language for a @jit helper called from a kernel
    (idempotent). Triton 3.6 binds the builtins of the modules the helper sees to the interpreter on every call and
    never unbinds them (a launch's own bindings are undone): afterwards a kernel compiled for a GPU in the same
    process -- a Gluon kernel -- failed. Only where ``InterpretedFunction.__call__`` has that shape and
    ``_patch_lang`` returns the scope that undoes it; the call is otherwise Triton's."""
    import inspect

    from triton.runtime import interpreter

    function = getattr(interpreter, "InterpretedFunction", None)
    if function is None or getattr(function.__call__, "_fa2_scoped", False):
        return
    try:
        source = inspect.getsource(function.__call__)
    except (OSError, TypeError):
        return
    if "_patch_lang(self.fn)" not in source or "restore" in source or not hasattr(interpreter, "_LangPatchScope"):
        return

    def __call__(self, *args, **kwargs):
        scope = interpreter._patch_lang(self.fn)
        try:
            fn = self.rewrite()
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                raise interpreter.InterpreterError(repr(e)) from e
        finally:
            scope.restore()

    __call__._fa2_scoped = True
    __call__.unpatched = function.__call__
    function.__call__ = __call__


# ------------------------------------------------------------------------------------ process-wide state

_ALLOCATOR_SET = False


def ensure_tma_allocator():
    """Install the scratch allocator device-side TMA descriptors need, once, when first needed."""
    global _ALLOCATOR_SET
    if not _ALLOCATOR_SET and runtime.DEVICE == "cuda":
        triton.set_allocator(lambda size, alignment, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
        _ALLOCATOR_SET = True


def raise_recompile_limit(at_least=512):
    """Let dynamo compile one graph per shape in a sweep (its default limit is 8)."""
    import torch._dynamo
    config = torch._dynamo.config
    knob = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, knob, max(getattr(config, knob), at_least))


# --------------------------------------------------------------------------------------- direct launch

def _compiled(kernel):
    """The CompiledKernel a JIT launch returned, if this Triton exposes what a direct launch needs."""
    kernel = kernel.result() if hasattr(kernel, "result") else kernel   # async compilation returns a future
    needed = ("run", "function", "packed_metadata")
    return kernel if kernel is not None and all(hasattr(kernel, a) for a in needed) else None


def _hooked(hook):
    """A launch hook is set (a profiler): Triton 3.6 keeps them in a HookChain, older versions as None/callable."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _current_stream(device):
    from triton.runtime.driver import driver
    return driver.active.get_current_stream(device)


class DirectLaunch:
    """Launch one specialisation of a @triton.jit kernel: through the JIT the first time, directly afterwards.

    The caller guarantees that every call passes arguments the JIT would specialise identically (same
    integer values, same pointer alignment): `fa2.attention` keys its plans on everything that decides that.
    The JIT path is kept for the interpreter, for launch hooks (profilers), when another device is current
    (it then launches on the tensors' device, not the current one), and on Triton versions not pinned."""

    def __init__(self, kernel, grid, options, device):
        self.kernel, self.grid, self.options, self.device = kernel, grid, options, device
        self.compiled = None
        self.allowed = direct_launch_allowed()

    def ready(self):
        """True when `direct` may be used: compiled here, no launch hooks, the tensors' device is current."""
        from triton import knobs
        return (self.compiled is not None and not _hooked(knobs.runtime.launch_enter_hook)
                and not _hooked(knobs.runtime.launch_exit_hook) and torch.cuda.current_device() == self.device)

    def __call__(self, *args):
        """Through the JIT (binds, specialises, compiles on first use); remembers the compiled kernel."""
        if runtime.INTERPRET:
            self.kernel[self.grid](*args, **self.options)
            return
        with torch.cuda.device(self.device):                 # the JIT launches on the current device
            launched = self.kernel[self.grid](*args, **self.options)
        if self.compiled is None and self.allowed:
            self.compiled = _compiled(launched)

    def direct(self, *args):
        """The compiled kernel's launcher with every argument in order (LAUNCH_ARGUMENTS); only when `ready()`."""
        compiled = self.compiled
        grid_0, grid_1, grid_2 = self.grid
        compiled.run(grid_0, grid_1, grid_2, _current_stream(self.device), compiled.function,
                     compiled.packed_metadata, None, None, None, *args)


class HostDescriptor:
    """What Triton's launcher reads of a host TensorDescriptor (base, shape, strides, padding), without the
    per-call validation: the plan validated shape, strides and block once, and its key fixes the alignment."""
    __slots__ = ("base", "shape", "strides", "block_shape", "padding")

    def __init__(self, base, layout):
        self.base = base
        self.shape, self.strides, self.block_shape, self.padding = layout


class EncodedDescriptors:
    """Host TMA descriptors encoded once per base address, handed to the launcher Triton wraps them for.

    An encoded descriptor (CUtensorMap) depends only on the base address, the layout and the box; a plan fixes
    the last two, and the caching allocator hands the same few addresses out again and again, so encoding is
    mostly a dictionary hit. Triton 3.6's launcher re-encodes every descriptor on every call in Python; this
    reaches past that wrapper to the compiled launch function it wraps. `build` returns None whenever that
    wrapper does not look exactly as expected (another Triton version): the plan then keeps `direct`."""

    MAX_ADDRESSES = 256                       # per descriptor: cleared when full

    def __init__(self, launch_fn, metadata, prefix, layouts, make_arg):
        self.launch_fn, self.metadata, self.prefix, self.layouts = launch_fn, metadata, prefix, layouts
        self.make_arg = make_arg
        self.encoded = [{} for _ in layouts]

    @classmethod
    def build(cls, compiled, layouts):
        if not direct_launch_allowed():
            return None
        try:
            from triton.backends.nvidia.driver import make_tensordesc_arg
            launcher = compiled.run
            wrapper = launcher.launch
            cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
            launch_fn, metadata = cells["launcher"], cells["tensordesc_meta"]
            scratch = launcher.global_scratch_size or getattr(launcher, "profile_scratch_size", 0)
            if (len(metadata) != len(layouts) or any(m is None for m in metadata) or scratch
                    or cells["tensordesc_indices"] != set(range(len(layouts)))):
                return None
            prefix = (launcher.launch_cooperative_grid, launcher.launch_pdl, None, None, compiled.packed_metadata,
                      None, None, None)       # scratch buffers, metadata, launch metadata, no enter/exit hooks
        except (AttributeError, KeyError, TypeError, ValueError, ImportError):
            return None
        return cls(launch_fn, metadata, prefix, layouts, make_tensordesc_arg)

    def launch(self, lean, tensors, rest):
        """Launch `lean`'s compiled kernel (only when `lean.ready()`) with descriptors of `tensors`, then `rest`."""
        grid_0, grid_1, grid_2 = lean.grid
        args = [a for slot, t in enumerate(tensors) for a in self.args(slot, t)]
        self.launch_fn(grid_0, grid_1, grid_2, _current_stream(lean.device), lean.compiled.function,
                       *self.prefix, *args, *rest)

    def args(self, slot, tensor):
        """The launcher's arguments for descriptor `slot` over `tensor`: the encoded map, then shape and strides."""
        encoded = self.encoded[slot]
        address = tensor.data_ptr()
        args = encoded.get(address)
        if args is None:
            if len(encoded) >= self.MAX_ADDRESSES:
                encoded.clear()
            args = encoded[address] = self.make_arg(HostDescriptor(tensor, self.layouts[slot]), self.metadata[slot])
        return args
