"""Launch plans: a call's host work done once per input signature, so a repeat call costs little more than a launch.

A small attention problem runs on the GPU in 10-30 us, while the host side of a plain Triton call -- argument
binding and specialisation in the JIT, building TMA descriptors, choosing a config, checking inputs -- took
about 200 us a call on the H200 machine (`book/results/overhead.md`). Everything in that list except the
tensors' addresses depends only on the shapes, strides, dtypes, device and flags of the call. A plan computes
it once; each call then allocates the outputs, swaps its tensors into the argument list, and hands the list to
the compiled kernel's launcher (`fa2._triton_compat.DirectLaunch`, on the Triton versions it is pinned to).

`plan_for` is the only way in: eager calls and the torch.compile custom op both take their plan from it, so
both launch the same kernel with the same config (`fa2.dispatch`).
"""

import torch

from fa2._triton_compat import DirectLaunch, EncodedDescriptors, HostDescriptor
from fa2.chapters.fast import _fa2_fast_kernel, fast_descriptors, fast_launch
from fa2.chapters.forward import attention_forward
from fa2.dispatch import gluon_for, kernel_for, select_config
from fa2.validate import check_attention_inputs, softmax_scale


def launch_descriptors(plan, tensors, rest):
    """A compiled plan's launch (plan.launch ready) with host TMA descriptors of `tensors` (laid out as
    plan.layouts, in order), then the arguments `rest`: descriptors encoded once per address where this Triton
    allows it (EncodedDescriptors, built on the first call and kept in plan.encoded), else through the launcher's
    own encoding (HostDescriptor). FastPlan and GluonPlan launch this way."""
    encoded = plan.encoded
    if encoded is None:
        encoded = plan.encoded = EncodedDescriptors.build(plan.launch.compiled, plan.layouts) or False
    if encoded:
        encoded.launch(plan.launch, tensors, rest)
    else:
        plan.launch.direct(*(HostDescriptor(t, layout) for t, layout in zip(tensors, plan.layouts)), *rest)


class FastPlan:
    """The Hopper kernel's launch for one input signature: grid, config, strides and scalars fixed."""

    kernel = "fast"

    def __init__(self, q, k, v, causal, scale, config, host_desc):
        B, H, N_Q, _ = q.shape
        self.config = config
        self.lse_shape = (B, H, N_Q)
        o = torch.empty_like(q)
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        grid, args, options = fast_launch(q, k, v, o, lse, causal, scale, config, host_desc=host_desc)
        self.host_desc = host_desc
        # args[:8]: q, k, v, o (pointers or descriptors), then the second column piece's descriptors or None
        self.unused = (None,) * sum(a is None for a in args[:8])
        if host_desc:                           # q, k, v, o descriptors, validated: only their bases change
            self.layouts = [(d.shape, d.strides, d.block_shape, d.padding) for d in args[:8] if d is not None]
            self.block_m, self.block_n = args[0].block_shape[2], args[1].block_shape[2]
        self.scalars = args[9:]                 # strides, sizes, scale and constexprs: the same every call
        self.launch = DirectLaunch(_fa2_fast_kernel, grid, options, q.device.index)
        self.encoded = None                     # EncodedDescriptors once compiled (host descriptors only)

    def __call__(self, q, k, v):
        o = torch.empty_like(q)
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        if not self.launch.ready():
            tensors = (fast_descriptors(q, k, v, o, self.block_m, self.block_n) if self.host_desc
                       else (q, k, v, o, *self.unused))
            self.launch(*tensors, lse, *self.scalars)
        elif self.host_desc:
            viewed = (q, k, v, o) * (len(self.layouts) // 4)   # the tensor under each descriptor, in order
            launch_descriptors(self, viewed, (*self.unused, lse, *self.scalars))
        else:
            self.launch.direct(q, k, v, o, *self.unused, lse, *self.scalars)
        return o, lse


def signature(q, k, v, causal, scale):
    """Everything a plan depends on, cheap to compute: shapes, strides, dtypes, devices, flags, 16-byte alignment,
    and whether autograd would need a graph. Raises AttributeError/TypeError for non-tensors (the caller then runs
    the full input checks, which name the argument)."""
    return (q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype,
            q.device, k.device, v.device, causal.__class__, causal, scale.__class__, scale,
            (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15,
            torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))


class GenericPlan:
    """Chapter 5's kernel with the config chosen for this signature (portable: any GPU, any strides)."""

    kernel = "generic"

    def __init__(self, causal, scale, config):
        self.causal, self.scale, self.config = causal, scale, config

    def __call__(self, q, k, v):
        return attention_forward(q, k, v, self.causal, self.scale, **self.config)


class GluonPlan:
    """The Gluon kernel (chapter 12, fa2/gluon/attention_hopper.py) with the rung and config its table chose,
    launched like FastPlan: grid, descriptor layouts, scalars and constexprs fixed once; each call swaps in its
    tensors' addresses. (Through `attention_gluon`, Triton's JIT path, a call cost 0.1-0.2 ms more host time
    than chapter 6's plan on the H200: more than the whole kernel at small shapes.)"""

    kernel = "gluon"

    def __init__(self, q, k, v, causal, scale, choice, window_left=-1):
        from fa2.gluon import attention_hopper
        self.rung, self.config = choice
        B, H, N_Q, _ = q.shape
        self.lse_shape = (B, H, N_Q)
        o = torch.empty_like(q)
        grid, self.layouts, scalars, constexprs, options = attention_hopper.gluon_launch(
            q, k, v, o, causal, scale, self.rung, self.config, window_left)
        self.descriptors = attention_hopper.gluon_descriptors
        self.scalars = scalars
        self.constexprs = tuple(constexprs.values())     # in kernel order, after lse, the scalars and o
        self.launch = DirectLaunch(attention_hopper._attention_fwd_hopper, grid, dict(constexprs, **options),
                                   q.device.index)
        self.encoded = None                              # EncodedDescriptors once compiled

    def __call__(self, q, k, v):
        o = torch.empty_like(q)
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        if not self.launch.ready():
            self.launch(*self.descriptors((q, k, v, o), self.layouts), lse, *self.scalars, o)
            return o, lse
        launch_descriptors(self, (q, k, v, o), (lse, *self.scalars, o, *self.constexprs))
        return o, lse


def make_plan(q, k, v, causal, scale):
    """A plan for these inputs (checked already): kernel, config and launch arguments fixed."""
    choice = gluon_for(q, k, v, causal, scale)
    if choice is not None:
        return GluonPlan(q, k, v, causal, scale, choice)
    kernel = kernel_for(q, k, v)
    config = select_config(kernel, q, k, v, causal, scale)
    if kernel == "fast":
        return FastPlan(q, k, v, causal, scale, config, host_desc=True)
    return GenericPlan(causal, scale, config)


def window_plan_for(q, k, v, causal, scale, left, right, softcap):
    """The Gluon plan of a windowed call (inputs checked, scale a float) where the shipped table's window
    families choose the Gluon kernel, else None (the caller runs chapter 10's kernel). Cached per signature and
    window."""
    key = (signature(q, k, v, causal, scale), left, right, softcap)
    try:
        return WINDOW_PLANS[key]
    except KeyError:
        pass
    from fa2.gluon.dispatch import choose_window
    choice = choose_window(q, k, v, causal, scale, left, right, softcap)
    plan = None if choice is None else GluonPlan(q, k, v, True, scale, choice, window_left=left)
    return cache_plan(WINDOW_PLANS, key, plan, MAX_PLANS)


def chapter6_plan(q, k, v, causal, scale):
    """The plan `fa2.attention` would make for these inputs with the Gluon dispatch off: chapter 6's kernel on
    Hopper, chapter 5's elsewhere. Not cached (chapter6_attention keeps them): for timing chapter 6's kernel beside
    `fa2.attention`."""
    from fa2.gluon.dispatch import disabled

    check_attention_inputs(q, k, v, causal, scale)
    with disabled():
        return make_plan(q, k, v, causal, softmax_scale(q.shape[-1], scale))


PLANS = {}
WINDOW_PLANS = {}
MAX_PLANS = 4096


def cache_plan(plans, key, plan, max_plans):
    """plans[key] = plan, in a cache bounded to max_plans entries (a full one is emptied first); returns plan."""
    if len(plans) >= max_plans:
        plans.clear()
    plans[key] = plan
    return plan


CHAPTER6_PLANS = {}


def chapter6_attention(q, k, v, causal):
    """(o, lse) of chapter 6's kernel as `fa2.attention` would launch it with the Gluon dispatch off (chapter6_plan,
    kept per call signature as fa2.attention keeps its plans): fa2.ladder's v5 and fa2.bench's fa2_ch6."""
    key = signature(q, k, v, causal, None)
    plan = CHAPTER6_PLANS.get(key) or cache_plan(CHAPTER6_PLANS, key, chapter6_plan(q, k, v, causal, None),
                                                 MAX_PLANS)
    return plan(q, k, v)


def plan_for(q, k, v, causal, scale):
    """The cached plan of this call's signature; on a miss, check the inputs, then make and cache one."""
    try:
        key = signature(q, k, v, causal, scale)
        return PLANS[key]
    except KeyError:
        pass
    except (AttributeError, TypeError):              # not tensors, or unhashable flags: the checks name them
        check_attention_inputs(q, k, v, causal, scale)
        raise
    check_attention_inputs(q, k, v, causal, scale)  # raises, naming the argument, before anything is cached
    plan = make_plan(q, k, v, causal, softmax_scale(q.shape[-1], scale))
    return cache_plan(PLANS, key, plan, MAX_PLANS)
