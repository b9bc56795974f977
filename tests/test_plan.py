"""Launch plans (fa2/plan.py) and fa2.attention's plan cache: a plan made on some inputs must compute the same
function on any later inputs of its signature, and a cached plan must never skip an input check."""
import math

import pytest
import torch

import fa2
from fa2 import dispatch, plan as plans, runtime
from fa2.chapters.fast import attention_fast
from fa2.plan import FastPlan, signature
from fa2.chapters.reference import attention_reference
from fa2.testing import check_attention, make_qkv

# GQA+tails, whole tiles, MQA, two column pieces (64 + 32: eight host descriptors)
SHAPES = [(1, 4, 2, 37, 70, 32), (2, 2, 2, 64, 64, 16), (1, 4, 1, 70, 37, 32), (1, 2, 1, 37, 45, 96)]


@pytest.mark.parametrize("host_desc", [False, True], ids=["device-desc", "host-desc"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_plan_made_on_other_inputs_computes_the_same_function(shape, causal, host_desc):
    B, Hq, Hkv, Nq, Nk, D = shape
    dtype = torch.bfloat16
    q0, k0, v0 = make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype)
    plan = FastPlan(q0, k0, v0, causal, 0.2, config=None, host_desc=host_desc)
    plan(q0, k0, v0)                                  # first call: through the JIT (compiles on a GPU)
    for _ in range(2):                                # later calls: fresh inputs, the direct launch on a GPU
        check_attention(lambda q, k, v, causal, scale: plan(q, k, v), B, Hq, Hkv, Nq, Nk, D, dtype, causal,
                        scale=0.2)
    q, k, v = make_qkv(B, Hq, Hkv, Nq, Nk, D, dtype)
    o, lse = plan(q, k, v)
    o_ref, lse_ref = attention_fast(q, k, v, causal, 0.2, host_desc=host_desc)
    assert torch.equal(o, o_ref) and torch.equal(lse, lse_ref)   # the same kernel with the same arguments
    if runtime.DEVICE == "cuda":
        assert plan.launch.compiled is not None, "the plan never switched to the direct launch"
        assert bool(plan.encoded) == host_desc, "host descriptors did not take the encoded-descriptor launch"


@pytest.mark.parametrize("host_desc", [False, True], ids=["device-desc", "host-desc"])
def test_same_addresses_new_contents(host_desc):
    """Encoded descriptors are cached per address: a call on refilled tensors must see the new contents."""
    q, k, v = make_qkv(1, 4, 2, 70, 90, 32, torch.float16)
    plan = FastPlan(q, k, v, True, 0.2, config=None, host_desc=host_desc)
    for _ in range(3):                                # JIT, then encode (miss), then the cached encoding (hit)
        o, lse = plan(q, k, v)
        o_ref, lse_ref = attention_fast(q, k, v, True, 0.2, host_desc=host_desc)
        assert torch.equal(o, o_ref) and torch.equal(lse, lse_ref)
        for t in (q, k, v):
            t.copy_(torch.randn_like(t))


def test_plan_writes_every_output_element(monkeypatch):
    """Outputs start as NaN: a row the plan's launch forgets stays NaN and fails the check."""
    q0, k0, v0 = make_qkv(1, 2, 2, 50, 50, 32, torch.float16)
    plan = FastPlan(q0, k0, v0, True, 0.25, config=None, host_desc=False)
    plan(q0, k0, v0)
    real_empty, real_empty_like = torch.empty, torch.empty_like
    monkeypatch.setattr(torch, "empty_like", lambda t, **kw: real_empty_like(t, **kw).fill_(math.nan))
    poison = lambda t: t.fill_(math.nan) if t.is_floating_point() else t   # not the int8 TMA scratch buffer
    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poison(real_empty(*a, **kw)))
    check_attention(lambda q, k, v, causal, scale: plan(q, k, v), 1, 2, 2, 50, 50, 32, torch.float16, True, scale=0.25)


def _qkv(n=16, dtype=torch.float16):
    return [torch.randn(1, 4, n, 32, dtype=dtype, device=runtime.DEVICE) for _ in range(3)]


def test_one_plan_per_signature():
    plans.PLANS.clear()
    q, k, v = _qkv()
    o1 = fa2.attention(q, k, v, causal=True)
    o2 = fa2.attention(*_qkv(), causal=True)           # same signature, other tensors: plan reused
    assert len(plans.PLANS) == 1 and not torch.equal(o1, o2)
    fa2.attention(q, k, v, causal=False)
    fa2.attention(q, k, v, causal=True, scale=0.5)
    fa2.attention(*_qkv(17), causal=True)
    fa2.attention(q.transpose(2, 3).contiguous().transpose(2, 3), k, v, causal=True)   # other strides
    assert len(plans.PLANS) == 5


def test_signature_tells_apart_what_the_kernel_specialises_on():
    q, k, v = _qkv()
    base = signature(q, k, v, True, None)
    buffer = torch.randn(q.numel() + 1, dtype=q.dtype, device=q.device)
    q_off = buffer[1:].view(q.shape)                  # 2 bytes past a 16-byte boundary: TMA cannot load it
    assert signature(q_off, k, v, True, None) != base
    assert signature(q, k, v, 1, None) != base        # 1 == True and hash(1) == hash(True): the class is keyed
    assert signature(q, k, v, True, 1) != signature(q, k, v, True, 1.0)
    assert signature(q.to(torch.bfloat16), k, v, True, None) != base
    q.requires_grad_(True)
    assert signature(q, k, v, True, None) != base


def test_cached_plan_does_not_skip_input_checks():
    q, k, v = _qkv()
    fa2.attention(q, k, v, causal=True)               # the plan for this signature is cached now
    with pytest.raises(TypeError, match="causal"):
        fa2.attention(q, k, v, causal=1)
    with pytest.raises(TypeError, match="scale"):
        fa2.attention(q, k, v, causal=True, scale=float("nan"))
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        fa2.attention(q.tolist(), k, v, causal=True)
    q.requires_grad_(True)
    with pytest.raises(NotImplementedError, match="forward-only"):
        fa2.attention(q, k, v, causal=True)
    with torch.no_grad():
        assert fa2.attention(q, k, v, causal=True).shape == q.shape


def test_misaligned_input_after_an_aligned_one_is_still_right():
    q, k, v = _qkv(40)
    fa2.attention(q, k, v, causal=True)
    buffer = torch.randn(q.numel() + 1, dtype=q.dtype, device=q.device)
    q_off = buffer[1:].view(q.shape)                  # 2 bytes past a 16-byte boundary: the generic kernel
    # against fp64, not SDPA: on the H200 (torch 2.11) SDPA's default backend returned a wrong output
    # (relative error 0.83-1.0) for such a q, while fa2 matched fp64 (gpu/misaligned.py)
    ref = attention_reference(q_off, k, v, True)
    torch.testing.assert_close(fa2.attention(q_off, k, v, causal=True).double(), ref, atol=1e-2, rtol=1e-2)


def test_plan_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(plans, "MAX_PLANS", 2)
    plans.PLANS.clear()
    for n in (16, 17, 18, 19):
        fa2.attention(*_qkv(n))
        assert len(plans.PLANS) <= 2


def test_plan_keeps_no_input_alive():
    """A cached plan must not pin the tensors it was made with (GPU memory would never be freed)."""
    import gc
    import weakref
    q, k, v = make_qkv(1, 2, 2, 40, 40, 32, torch.float16)
    refs = [weakref.ref(t) for t in (q, k, v)]
    plans = [FastPlan(q, k, v, True, 0.2, config=None, host_desc=h) for h in (False, True)]
    for plan in plans:
        plan(q, k, v)
    del q, k, v
    gc.collect()
    assert all(r() is None for r in refs) and plans


def test_small_grids_get_the_small_grid_config(monkeypatch):
    monkeypatch.setattr(dispatch, "sm_count", lambda index: 132)
    table = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2, WARP_SPECIALIZE=False)
    q = torch.empty(1, 16, 512, 64)                    # 4 x 16 = 64 programs of 128 rows: under 4 waves of 132
    assert dispatch.fill_the_gpu(table, q) == dict(table, **dispatch.SMALL_GRID_CONFIGS[64])
    q = torch.empty(8, 32, 2048, 128)                  # 16 x 256 = 4096 programs: the table's choice stays
    assert dispatch.fill_the_gpu(table, q) is table
    q = torch.empty(1, 4, 512, 32)                     # a head dim the rule was not measured for
    assert dispatch.fill_the_gpu(table, q) is table


def test_small_grid_rule_keeps_a_config_tuned_for_the_calls_waves(monkeypatch):
    """The rule stands in for tuning a small grid; once the table has a config for the call's bucket of waves
    (fa2.tune --cases tail), that config is used as tuned."""
    table = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2)
    monkeypatch.setattr(runtime, "INTERPRET", False)
    monkeypatch.setattr(dispatch, "sm_count", lambda index: 132)
    monkeypatch.setattr(dispatch, "choose_config", lambda *a: table)
    q = torch.empty(1, 16, 512, 64)                    # 64 programs: under 4 waves of 132
    monkeypatch.setattr(dispatch, "tuned_for_its_waves", lambda *a: True)
    assert dispatch.select_config("fast", q, q, q, False, None) is table
    monkeypatch.setattr(dispatch, "tuned_for_its_waves", lambda *a: False)
    assert dispatch.select_config("fast", q, q, q, False, None) == dict(table, **dispatch.SMALL_GRID_CONFIGS[64])


def test_launch_descriptors_encodes_once_or_falls_back(monkeypatch):
    """FastPlan's and GluonPlan's compiled launches: EncodedDescriptors built on the first call and reused, the
    tensors and the other arguments handed over in order; where it cannot be built (another Triton), the
    launcher gets HostDescriptors of the tensors with the plan's layouts, then the same arguments."""
    import types
    from fa2 import plan as fa2_plan
    calls, builds = [], []

    class Encoded:
        def launch(self, lean, tensors, rest):
            calls.append(("encoded", lean, tensors, rest))
    launch = types.SimpleNamespace(compiled="compiled",
                                   direct=lambda *args: calls.append(("direct",) + args))
    layouts = [((1, 2, 64, 32), (4096, 2048, 32, 1), [1, 1, 64, 32], "zero"),
               ((1, 2, 80, 32), (5120, 2560, 32, 1), [1, 1, 16, 32], "zero")]
    plan = types.SimpleNamespace(launch=launch, layouts=layouts, encoded=None)
    monkeypatch.setattr(fa2_plan.EncodedDescriptors, "build",
                        lambda compiled, layouts: builds.append((compiled, layouts)) or Encoded())
    for _ in range(2):
        fa2_plan.launch_descriptors(plan, ("q", "k"), ("lse", 1))
    assert builds == [("compiled", layouts)]
    assert calls == [("encoded", launch, ("q", "k"), ("lse", 1))] * 2
    calls.clear()
    plan.encoded = None
    monkeypatch.setattr(fa2_plan.EncodedDescriptors, "build", lambda compiled, layouts: None)
    fa2_plan.launch_descriptors(plan, ("q", "k"), ("lse", 1))
    assert plan.encoded is False
    (kind, dq, dk, *rest), = calls
    assert kind == "direct" and rest == ["lse", 1]
    assert (dq.base, dk.base) == ("q", "k")
    assert [(d.shape, d.strides, d.block_shape, d.padding) for d in (dq, dk)] == layouts
