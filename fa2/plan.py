"""Launch plans: a call's host work done once per input signature, so a repeat call costs little more than a launch.

A small attention problem runs on the GPU in 10-30 us, while the host side of a plain Triton call -- argument
binding and specialisation in the JIT, building TMA descriptors, choosing a config, checking inputs -- took
about 200 us a call on the H200 machine (session 1; `book/results/overhead.md`). Everything in that list except the
tensors' addresses depends only on the shapes, strides, dtypes, device and flags of the call. A `FastPlan`
computes it once; each call then allocates the outputs, swaps its tensors into the argument list, and hands the
list to the compiled kernel's launcher (`LeanLaunch`).
"""

import torch
import triton
from triton import knobs
from triton.runtime.driver import driver

from fa2 import runtime
from fa2.chapters.fast import _fa2_fast_kernel, fast_descriptors, fast_launch


def _compiled(kernel):
    """The CompiledKernel a JIT launch returned, if this Triton exposes what a direct launch needs."""
    kernel = kernel.result() if hasattr(kernel, "result") else kernel   # async compilation returns a future
    needed = ("run", "function", "packed_metadata")
    return kernel if kernel is not None and all(hasattr(kernel, a) for a in needed) else None


def _hooked(hook):
    """A launch hook is set (a profiler): Triton 3.6 keeps them in a HookChain, older versions as None/callable."""
    return hook is not None and bool(getattr(hook, "calls", True))


class LeanLaunch:
    """Launch one specialisation of a @triton.jit kernel: through the JIT the first time, directly afterwards.

    The caller guarantees that every call passes arguments the JIT would specialise identically (same
    integer values, same pointer alignment): `fa2.attention` keys its plans on everything that decides that.
    The JIT path is kept for the interpreter, for launch hooks (profilers), and when another device is current
    (it then launches on the tensors' device, not the current one)."""

    def __init__(self, kernel, grid, options, device):
        self.kernel, self.grid, self.options, self.device = kernel, grid, options, device
        self.compiled = None

    def ready(self):
        """True when `direct` may be used: compiled here, no launch hooks, the tensors' device is current."""
        return (self.compiled is not None and not _hooked(knobs.runtime.launch_enter_hook)
                and not _hooked(knobs.runtime.launch_exit_hook) and torch.cuda.current_device() == self.device)

    def __call__(self, *args):
        """Through the JIT (binds, specialises, compiles on first use); remembers the compiled kernel."""
        if runtime.INTERPRET:
            self.kernel[self.grid](*args, **self.options)
            return
        with torch.cuda.device(self.device):                 # the JIT launches on the current device
            launched = self.kernel[self.grid](*args, **self.options)
        if self.compiled is None:
            self.compiled = _compiled(launched)

    def direct(self, *args):
        """The compiled kernel's launcher with every argument in order; only when `ready()`."""
        compiled = self.compiled
        grid_m, grid_bh, grid_z = self.grid
        compiled.run(grid_m, grid_bh, grid_z, driver.active.get_current_stream(self.device), compiled.function,
                     compiled.packed_metadata, None, None, None, *args)


class _HostDescriptor:
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

    def __init__(self, launch_fn, metadata, prefix, layouts):
        self.launch_fn, self.metadata, self.prefix, self.layouts = launch_fn, metadata, prefix, layouts
        self.encoded = [{} for _ in layouts]

    @classmethod
    def build(cls, compiled, layouts):
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
        plan = cls(launch_fn, metadata, prefix, layouts)
        plan.make_arg = make_tensordesc_arg
        return plan

    def launch(self, lean, q, k, v, o, *rest):
        """Launch `lean`'s compiled kernel (only when `lean.ready()`) with these descriptors, then `rest`."""
        grid_m, grid_bh, grid_z = lean.grid
        self.launch_fn(grid_m, grid_bh, grid_z, driver.active.get_current_stream(lean.device), lean.compiled.function,
                       *self.prefix, *self.args(0, q), *self.args(1, k), *self.args(2, v), *self.args(3, o), *rest)

    def args(self, slot, tensor):
        """The launcher's arguments for descriptor `slot` over `tensor`: the encoded map, then shape and strides."""
        encoded = self.encoded[slot]
        address = tensor.data_ptr()
        args = encoded.get(address)
        if args is None:
            if len(encoded) >= self.MAX_ADDRESSES:
                encoded.clear()
            args = encoded[address] = self.make_arg(_HostDescriptor(tensor, self.layouts[slot]), self.metadata[slot])
        return args


class FastPlan:
    """The Hopper kernel's launch for one input signature: grid, config, strides and scalars fixed."""

    def __init__(self, q, k, v, causal, scale, config, host_desc):
        B, H, N_Q, _ = q.shape
        self.lse_shape = (B, H, N_Q)
        o = torch.empty_like(q)
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        grid, args, options = fast_launch(q, k, v, o, lse, causal, scale, config, host_desc=host_desc)
        self.host_desc = host_desc
        if host_desc:                           # q, k, v, o descriptors, validated: only their bases change
            self.layouts = [(d.shape, d.strides, d.block_shape, d.padding) for d in args[:4]]
            self.block_m, self.block_n = args[0].block_shape[2], args[1].block_shape[2]
        self.scalars = args[5:]                 # strides, sizes, scale and constexprs: the same every call
        self.launch = LeanLaunch(_fa2_fast_kernel, grid, options, q.device.index)
        self.encoded = None                     # EncodedDescriptors once compiled (host descriptors only)

    def __call__(self, q, k, v):
        o = torch.empty_like(q)
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        if not self.launch.ready():
            tensors = fast_descriptors(q, k, v, o, self.block_m, self.block_n) if self.host_desc else (q, k, v, o)
            self.launch(*tensors, lse, *self.scalars)
        elif self.host_desc:
            encoded = self.encoded
            if encoded is None:
                encoded = self.encoded = EncodedDescriptors.build(self.launch.compiled, self.layouts) or False
            if encoded:
                encoded.launch(self.launch, q, k, v, o, lse, *self.scalars)
            else:
                dq, dk, dv, do = self.layouts
                self.launch.direct(_HostDescriptor(q, dq), _HostDescriptor(k, dk), _HostDescriptor(v, dv),
                                   _HostDescriptor(o, do), lse, *self.scalars)
        else:
            self.launch.direct(q, k, v, o, lse, *self.scalars)
        return o, lse


def signature(q, k, v, causal, scale):
    """Everything a plan depends on, cheap to compute: shapes, strides, dtypes, devices, flags, 16-byte alignment,
    and whether autograd would need a graph. Raises AttributeError/TypeError for non-tensors (the caller then runs
    the full input checks, which name the argument)."""
    return (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype,
            q.device, k.device, v.device, causal.__class__, causal, scale.__class__, scale,
            (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15,
            torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
