"""fa2.gluon: the Hopper FlashAttention rungs written in Gluon compile for sm_90 on any machine (no GPU needed).

Each test AOT-compiles a rung (triton.compile of a GluonASTSource for a cuda:90 target, ~1-2 s each) and reads
the PTX: the rungs must use wgmma and TMA, rung 2 must keep a P·V wgmma in flight (``wait_group 1``), rung 3
must split registers between partitions (``setmaxnreg``). Whether they compute attention correctly and how fast
is for the GPU (``gpu/gluon_check.sh``). bf16 at D 64 and 128, causal and not, runs by default (~20 s);
``FA2_GLUON_ALL=1`` adds fp16 everywhere. Skipped on Triton versions other than the one the Gluon API was
written against (see ``fa2.gluon.SUPPORTED_TRITON``)."""
import os

import pytest
import torch

import fa2.gluon

OK, REASON = fa2.gluon.available()
pytestmark = pytest.mark.skipif(not OK, reason=REASON)

ALL = os.environ.get("FA2_GLUON_ALL") == "1"
H100_SHARED = 227 * 1024        # the most shared memory one block may use on sm_90
CONFIGS = [(rung, D, torch.bfloat16, causal) for rung in (1, 2, 3) for D in (64, 128) for causal in (False, True)]
CONFIGS += [(rung, D, torch.float16, causal) for rung in (1, 2, 3) for D in (64, 128) for causal in (False, True)
            if ALL or (rung, D, causal) == (2, 128, True)]


@pytest.fixture(scope="module")
def hopper():
    from fa2.gluon import attention_hopper
    return attention_hopper


@pytest.mark.parametrize("rung,D,dtype,causal", CONFIGS,
                         ids=[f"r{r}-D{d}-{str(t)[6:]}-{'causal' if c else 'full'}" for r, d, t, c in CONFIGS])
def test_rung_compiles_for_sm90(hopper, rung, D, dtype, causal):
    kernel = hopper.compile_rung(rung, D, dtype, causal)
    ptx = kernel.asm["ptx"]
    assert ".target sm_90a" in ptx
    assert "wgmma.mma_async" in ptx
    assert "cp.async.bulk.tensor" in ptx                       # TMA loads of Q, K, V and the store of O
    assert "mbarrier.try_wait" in ptx
    assert len(kernel.asm["cubin"]) > 0
    assert 0 < kernel.metadata.shared <= H100_SHARED
    waits = "wgmma.wait_group.sync.aligned 1" in ptx
    assert waits == (rung >= 2), "rung 2 and 3 wait for S while P·V is still in flight; rung 1 waits for all"
    assert ("setmaxnreg" in ptx) == (rung == 3), "only rung 3 is warp-specialised"


@pytest.mark.parametrize("rung", [1, 2, 3])
def test_rung_compiles_with_size_one_arguments(hopper, rung):
    """The launcher compiles an int argument equal to 1 as a constant: one head, one query, one key."""
    ptx = hopper.compile_rung(rung, 64, torch.bfloat16, True, ones=("H", "GROUP", "N_Q", "N_KV")).asm["ptx"]
    assert "wgmma.mma_async" in ptx


def test_resource_usage_without_gpu(hopper):
    """Registers and spills come from ptxas -v on the PTX: the money shot's rung 2 fits without spilling."""
    usage = hopper.resource_usage(hopper.compile_rung(2, 128, torch.bfloat16, True))
    assert 0 < usage["registers"] <= 255
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0
    assert usage["shared"] > 4 * 128 * 128 * 2      # Q + two K and two V tiles of 128 × 128 bf16 (+ barriers)


def test_descriptor_signature_matches_the_launcher(hopper):
    """compile_rung's hand-made signature string is what the launcher makes of a real host descriptor."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    x = torch.empty(2, 4, 200, 64, dtype=torch.bfloat16)
    box = [1, 1, 128, 64]
    desc = TensorDescriptor.from_tensor(x, box, hopper._layout(box, x.dtype))
    assert native_specialize_impl(BaseBackend, desc, False, True, True)[0] == hopper.descriptor_signature(box, x.dtype)


def test_attention_gluon_refuses_a_non_hopper_device(hopper):
    q = torch.zeros(1, 2, 128, 64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="sm_90"):
        hopper.attention_gluon(q, q, q, causal=True)


def test_bad_arguments_are_refused(hopper):
    with pytest.raises(ValueError, match="rung"):
        hopper.compile_rung(4)
    with pytest.raises(ValueError, match="head dim"):
        hopper.compile_rung(1, head_dim=96)


def test_launcher_specialises_no_size(hopper):
    """The JIT launcher binds H, GROUP, N_Q, N_KV as plain i32 (do_not_specialize): one compile per (rung, D,
    dtype, causal) over gpu/gluon_check.py's shapes, not one per size pattern (== 1, % 16), which would not fit
    its 55 s per rung; and the sizes are typed as compile_rung's signature types them."""
    from triton.backends.compiler import BaseBackend
    from triton.runtime.jit import create_function_from_signature

    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    kernel = hopper._attention_fwd_hopper
    binder = create_function_from_signature(kernel.signature, kernel.params, BaseBackend)
    x = torch.empty(1, 2, 1, 64, dtype=torch.bfloat16)
    box = [1, 1, 128, 64]
    desc = TensorDescriptor.from_tensor(x, box, hopper._layout(box, x.dtype))
    constexprs = hopper._constexprs(1, True, hopper.default_config(1, 64))
    specs = set()
    for sizes in [(4, 1, 128, 128), (4, 1, 1000, 1000), (8, 4, 1000, 1100), (2, 1, 1, 300), (2, 1, 300, 1),
                  (2, 1, 130, 4000)]:
        _, spec, _ = binder(desc, desc, desc, desc, torch.empty(4), *sizes, 0.5, **constexprs)
        specs.add(tuple(spec[5:9]))
    assert specs == {(("i32", None),) * 4}


def _tile_cases(block_m=128, block_n=128):
    from fa2.testing import causal_boundary_cases
    shapes = [(128, 128), (1000, 1000), (1000, 1100), (1100, 1000), (1, 300), (300, 1), (77, 77), (257, 129),
              (640, 640), (130, 4000), (1, 1), (128, 1), (1, 128), (129, 127), (500, 200)]
    return shapes + causal_boundary_cases(block_m, block_n)[::7]


@pytest.mark.parametrize("causal", [False, True])
def test_kv_range_covers_the_visible_keys(hopper, causal):
    """Every (query < N_Q, key) pair visible under bottom-right causality (key <= query + N_KV - N_Q) or all
    keys < N_KV lies in [0, kv_end); [0, free_end) is whole tiles every query of the tile sees (no mask)."""
    import numpy as np
    BM = BN = 128
    for nq, nk in _tile_cases(BM, BN):
        rows, keys = np.arange(nq)[:, None], np.arange(nk)[None, :]
        visible = (keys <= rows + nk - nq) if causal else np.ones((nq, nk), bool)
        for m_start in range(0, nq, BM):
            free_end, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal)
            tile = visible[m_start:m_start + BM]
            assert free_end % BN == 0 and 0 <= free_end <= kv_end <= nk, (nq, nk, m_start, free_end, kv_end)
            assert not tile[:, kv_end:].any(), (nq, nk, m_start, kv_end)
            assert tile[:, :free_end].all(), (nq, nk, m_start, free_end)


def _simulate_ring(rung, n_tiles, n_free, NUM_BUFFERS, ring_slot, rng):
    """The kernel's order of mbarrier waits, arrives and TMA loads as plain Python (rung 1: per tile wait K,
    wait V, free; rungs 2-3: S of tile j before P·V of j-1, each of the two key ranges peeled; rung 3: a
    producer that waits for the empty barrier), run under a random interleaving. Asserts that every wait
    passes on exactly the phase it means (not one phase early or late), no buffer is refilled before its
    tile is freed, every loaded tile is consumed, and nothing deadlocks."""
    count = {}                                   # completed phases per (kind, buffer)
    freed, loaded = set(), []

    def load(t):
        buf, _ = ring_slot(t, NUM_BUFFERS)
        assert t < NUM_BUFFERS or t - NUM_BUFFERS in freed, f"tile {t} overwrites tile {t - NUM_BUFFERS}"
        loaded.append(t)
        for kind in "kv":
            count[kind, buf] = count.get((kind, buf), 0) + 1

    def free(t):
        freed.add(t)
        if rung == 3:
            buf, _ = ring_slot(t, NUM_BUFFERS)
            count["e", buf] = count.get(("e", buf), 0) + 1
        elif t + NUM_BUFFERS < n_tiles:          # the predicated refill
            load(t + NUM_BUFFERS)

    def wait(kind, t):                           # None when it would block
        buf, phase = ring_slot(t, NUM_BUFFERS)
        if kind == "e":
            phase ^= 1
        c = count.get((kind, buf), 0)
        if (c & 1) == phase:
            return None
        want = t // NUM_BUFFERS + (kind != "e")
        assert c == want, f"{kind} wait of tile {t} passed with {c} phases completed, meaning {want}"
        return True

    consumer = []
    if rung == 1:
        for j in range(n_tiles):
            consumer += [("k", j), ("v", j), ("free", j)]
    else:
        for lo, hi in ((0, n_free), (n_free, n_tiles)):
            if lo < hi:
                consumer.append(("k", lo))
                for j in range(lo + 1, hi):
                    consumer += [("k", j), ("v", j - 1), ("free", j - 1)]
                consumer += [("v", hi - 1), ("free", hi - 1)]
    producer = [op for t in range(n_tiles) for op in (("e", t), ("load", t))] if rung == 3 else []
    if rung != 3:
        for t in range(min(NUM_BUFFERS, n_tiles)):
            load(t)
    agents = [consumer, producer]
    while any(agents):
        ready = []
        for ops in agents:
            if ops:
                kind, t = ops[0]
                if kind in ("free", "load") or wait(kind, t):
                    ready.append(ops)
        assert ready, f"deadlock: consumer at {consumer[:1]}, producer at {producer[:1]}"
        ops = ready[rng.integers(len(ready))]
        kind, t = ops.pop(0)
        if kind == "free":
            free(t)
        elif kind == "load":
            load(t)
    assert loaded == list(range(n_tiles)) and freed == set(range(n_tiles))


@pytest.mark.parametrize("rung", [1, 2, 3])
@pytest.mark.parametrize("NUM_BUFFERS", [1, 2, 3])
def test_ring_phases_and_counts(hopper, rung, NUM_BUFFERS):
    """The loads and waits of every query tile over the check's shapes, causal or not, under random
    interleavings (see _simulate_ring); rungs 2 and 3 need two buffers (the kernel static_asserts it)."""
    import numpy as np
    if rung > 1 and NUM_BUFFERS < 2:
        pytest.skip("rungs 2 and 3 wait for K of tile j before freeing tile j-1")
    rng = np.random.default_rng(0)
    BM = BN = 128
    for nq, nk in _tile_cases(BM, BN):
        for causal in (False, True):
            for m_start in range(0, nq, BM):
                free_end, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal)
                for _ in range(3):
                    _simulate_ring(rung, -(-kv_end // BN), free_end // BN, NUM_BUFFERS, hopper.ring_slot, rng)


def test_rung_compiles_after_a_kernel_ran_under_the_interpreter(hopper, tmp_path, monkeypatch):
    """In CI every other test runs kernels under the interpreter first; in Triton 3.6 a kernel that calls a @jit
    helper left triton.language.core bound to the interpreter, and the compile failed ('ir.value' object has no
    attribute 'dtype') -- a compile cache from an earlier run had hidden it (fa2/_triton_compat.py scopes those
    bindings; tests/test_runtime.py checks the language is left as it was)."""
    import fa2.runtime
    from fa2.chapters import fast
    from fa2.testing import check_attention
    if not fa2.runtime.INTERPRET:
        pytest.skip("the interpreter does not run here")
    check_attention(lambda q, k, v, causal, scale: fast.attention_fast(q, k, v, causal, scale, host_desc=True),
                    1, 2, 1, 40, 40, 64, torch.bfloat16, False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))       # a compile, not a cache hit
    assert "wgmma.mma_async" in hopper.compile_rung(1, 64, torch.bfloat16, False).asm["ptx"]
