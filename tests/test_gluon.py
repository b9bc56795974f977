"""fa2.gluon's rung 4 (and rungs 1-3 where they share it) modelled and compiled on any machine (no GPU needed).

Plain-Python models of what the kernel does at run time, checked against its host twins (kv_range, own_range,
ring_slot, turn_phase, work_item, schedule_table, ...): every visible key in a program's key range, the K/V
ring's mbarrier phases and the PINGPONG turns under random interleavings (_simulate_ring, _simulate_persistent),
PERSISTENT work items and SCHEDULED tables; and each of rung 4's compile-time options refused where it does not
apply and AOT-compiled for sm_90 (PTX, ptxas's registers and spills, shared memory; the options no table ships
only with FA2_GLUON_ALL=1, see UNSHIPPED). The rungs' own compile checks
are tests/test_gluon_rungs.py's. Skipped on Triton versions other than the one the Gluon API was written against
(see ``fa2.gluon.SUPPORTED_TRITON``)."""
import os

import pytest
import torch

import fa2.gluon

OK, REASON = fa2.gluon.available()
pytestmark = pytest.mark.skipif(not OK, reason=REASON)

H100_SHARED = 227 * 1024        # the most shared memory one block may use on sm_90
RUNGS = (1, 2, 3, 4)
# Options that were measured and are not shipped (no table runs them; test_unshipped_options_are_in_no_table keeps
# this true). Their host checks run everywhere; their sm_90 compiles (5-30 s each on two cores) with
# FA2_GLUON_ALL=1, which gpu/checks.sh sets when it runs every test on the GPU machine.
UNSHIPPED = ("CHAIN_RANGES", "Q_EARLY", "O_DIRECT", "Q_AHEAD", "SPLIT_TAIL", "SWAP_ROWS", "ONE_LOOP", "O_IN_Q",
             "LATE_EPILOGUE")
unshipped_compile = pytest.mark.skipif(os.environ.get("FA2_GLUON_ALL") != "1",
                                       reason="compiles a config no table ships (FA2_GLUON_ALL=1 runs it)")
# Shipped configs (fa2/configs/NVIDIA_H200.gluon.json; tests/test_gluon_rungs.py compiles each of them too, so the
# option tests below that use them mostly find them in Triton's cache): the money shot's, (32, 32, 512, 128)
# causal's, and one of the windows'. The other configs an option compiles in run with FA2_GLUON_ALL=1 only.
MONEY = dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1, PRODUCER_REGS=32, SPLIT_EMPTY=1, HALF_DIAGONAL=1)
SHORT_CAUSAL_WITHOUT_TABLE_AHEAD = dict(BLOCK_N=64, NUM_BUFFERS=5, PERSISTENT=1, SCHEDULED=2, PRODUCER_REGS=32,
                                        OWN_RANGES=1)
SHORT_CAUSAL = dict(SHORT_CAUSAL_WITHOUT_TABLE_AHEAD, TABLE_AHEAD=1)
SCHEDULED_WINDOW = dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1, SCHEDULED=1, PRODUCER_REGS=32)


@pytest.fixture(scope="module")
def hopper():
    from fa2.gluon import attention_hopper
    return attention_hopper


def _tile_cases(block_m=128, block_n=128):
    from fa2.testing import causal_boundary_cases
    shapes = [(128, 128), (1000, 1000), (1000, 1100), (1100, 1000), (1, 300), (300, 1), (77, 77), (257, 129),
              (640, 640), (130, 4000), (1, 1), (128, 1), (1, 128), (129, 127), (500, 200)]
    return shapes + causal_boundary_cases(block_m, block_n)[::7]


WINDOWS = [-1, 0, 1, 37, 64, 127, 128, 300, 1000]     # -1: none; causal only


def _visible(nq, nk, causal, window_left):
    """(nq, nk) bool: the (query, key) pairs attention sees, bottom-right causal (key <= query + nk - nq) and with
    a window also key >= query + nk - nq - window_left; every pair without the causal mask."""
    import numpy as np
    rows, keys = np.arange(nq)[:, None], np.arange(nk)[None, :]
    visible = (keys <= rows + nk - nq) if causal else np.ones((nq, nk), bool)
    if window_left >= 0:
        visible &= keys >= rows + nk - nq - window_left
    return visible


@pytest.mark.parametrize("causal,window_left", [(False, -1)] + [(True, w) for w in WINDOWS])
@pytest.mark.parametrize("BN", [128, 64])
def test_kv_range_covers_the_visible_keys(hopper, causal, window_left, BN):
    """Every (query < N_Q, key) pair visible under bottom-right causality (key <= query + N_KV - N_Q), with a
    window also key >= query + N_KV - N_Q - window_left, or all keys < N_KV, lies in [kv_start, kv_end);
    [free_start, free_end) is whole tiles every query of the tile sees (no mask); the ranges are in order and
    on the tile grid."""
    BM = 128
    for nq, nk in _tile_cases(BM, BN):
        visible = _visible(nq, nk, causal, window_left)
        for m_start in range(0, nq, BM):
            kv_start, free_start, free_end, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal, window_left)
            where = (nq, nk, m_start, kv_start, free_start, free_end, kv_end)
            tile = visible[m_start:m_start + BM]
            assert kv_start % BN == 0 and free_start % BN == 0 and free_end % BN == 0, where
            assert 0 <= kv_start <= free_start <= free_end <= kv_end <= nk, where
            assert not tile[:, kv_end:].any() and not tile[:, :kv_start].any(), where
            assert tile[:, free_start:free_end].all(), where
            if window_left >= 0 and nk >= 8 * BN and nq == nk and m_start >= window_left + 2 * BM:
                # a window far from the sequence's start: the skipped tiles follow it, not N
                assert kv_end - kv_start <= window_left + BM + 2 * BN, where


def _consumer_ops(rung, n_tiles, n_free, pingpong, n_lower=0):
    """One consumer's mbarrier waits, arrives and frees in the kernel's order (rung 1: per tile wait K, wait V,
    free; rungs 2-4: S of tile j before P·V of j-1, each key range peeled: n_lower masked tiles at a window's
    left edge, then the mask-free ones up to tile n_free, then the masked rest). PINGPONG (rung 4):
    ("turn", i) waits for turn i around each wgmma issue, ("pass", i) hands it over once issued; the turn
    indices are the kernel's (tile j's issue is turn j, + 1 for each earlier range that had tiles). ("sdone", j):
    S_j has completed (SPLIT_EMPTY frees tile j's K there; nothing otherwise); ("free", j): tile j's P·V has
    completed (its buffer, or with SPLIT_EMPTY its V, is freed). Tiles are counted from the program's first key
    tile."""
    ops = []
    if rung == 1:
        for j in range(n_tiles):
            ops += [("k", j), ("sdone", j), ("v", j), ("free", j)]
        return ops
    turn = lambda i: [("turn", i), ("pass", i)] if pingpong else []
    shift = 0
    for lo, hi in ((0, n_lower), (n_lower, n_free), (n_free, n_tiles)):
        if lo < hi:
            ops += [("k", lo)] + turn(lo + shift) + [("sdone", lo)]
            for j in range(lo + 1, hi):
                ops += ([("k", j)] + turn(j + shift)[:1] + [("v", j - 1)] + turn(j + shift)[1:]
                        + [("sdone", j), ("free", j - 1)])
            ops += [("v", hi - 1)] + turn(hi + shift) + [("free", hi - 1)]
            shift += 1
    return ops


def _barrier_wait(count, kind, t, c, NUM_BUFFERS, ring_slot, turn_phase, q_slots=1):
    """A simulated mbarrier wait: None when it would block, else True after asserting it passes on exactly the
    phase it means. count: completed phases per barrier key. kind "turn": consumer c's turn t (turn barrier c);
    "q": consumer c's t-th Q (PERSISTENT: one Q buffer, or q_slots = 2 under Q_AHEAD, item t's being t % 2);
    "k", "v": tile t's buffer loaded; "e": its buffer free."""
    if kind == "turn":
        key, phase, want = ("turn", c), turn_phase(t, c), t + c
    elif kind == "q":
        key, phase, want = ("q", c, t % q_slots), (t // q_slots) & 1, t // q_slots + 1
    else:                                        # "e" (SPLIT_EMPTY: "ek", "ev"): the producer's empty barriers
        buf, phase = ring_slot(t, NUM_BUFFERS)
        key = (kind, buf)
        empty = kind.startswith("e")
        if empty:
            phase ^= 1
        want = t // NUM_BUFFERS + (not empty)
    done = count.get(key, 0)
    if (done & 1) == phase:
        return None
    assert done == want, f"{kind} wait of {t} passed with {done} phases completed, meaning {want}"
    return True


FREES = ("free", "sdone", "kfree")                     # a consumer's ops that release ring buffers (_RingModel.free)
UNWAITED = FREES + ("load", "loadk", "loadv", "pass")   # ops that never wait: anyone may take them at any time


class _RingModel:
    """The K/V ring of a program with a producer partition (rungs 3-4) in plain Python: barrier phase counts,
    the consumers' frees and the producer's loads, each asserted to be on time. Without SPLIT_EMPTY one empty
    barrier per buffer ("e") takes each consumer's ("free", t); with it K's ("ek") takes ("sdone", t) and V's
    ("ev") takes ("free", t), and the producer loads K of tile t before V of tile t - 1 (_produce)."""

    def __init__(self, count, NUM_BUFFERS, ring_slot, consumers, split):
        self.count, self.nb, self.slot, self.consumers, self.split = count, NUM_BUFFERS, ring_slot, consumers, split
        self.arrivals, self.freed, self.loaded = {}, {"k": set(), "v": set()}, {"k": [], "v": []}

    def producer_ops(self, n_tiles, base=0):
        """The producer's waits and loads of tiles base .. base + n_tiles - 1 (one work item)."""
        if not self.split:
            return [op for t in range(base, base + n_tiles) for op in (("e", t), ("load", t))]
        ops = []
        for t in range(base, base + n_tiles):
            ops += [("ek", t), ("loadk", t)] + ([("ev", t - 1), ("loadv", t - 1)] if t > base else [])
        return ops + ([("ev", base + n_tiles - 1), ("loadv", base + n_tiles - 1)] if n_tiles else [])

    def free(self, kind, t):
        """A consumer's ("sdone", t) or ("free", t); ("kfree", t): a skipped tile's K freed (OWN_RANGES), as sdone."""
        if kind in ("sdone", "kfree") and not self.split:
            return
        parts = "kv" if not self.split else ("k" if kind in ("sdone", "kfree") else "v")
        # an mbarrier counts arrives, not tiles: one for tile t before tile t - NUM_BUFFERS's phase completed
        # would complete that phase instead
        assert t < self.nb or t - self.nb in self.freed[parts[0]], \
            f"free of tile {t} lands on tile {t - self.nb}'s phase"
        self.arrivals[parts, t] = self.arrivals.get((parts, t), 0) + 1
        assert self.arrivals[parts, t] <= self.consumers
        if self.arrivals[parts, t] == self.consumers:
            buf, _ = self.slot(t, self.nb)
            for part in parts:
                self.freed[part].add(t)
            key = ("e", buf) if not self.split else ("e" + parts, buf)
            self.count[key] = self.count.get(key, 0) + 1

    def load(self, kind, t):
        """The producer's ("load", t), or SPLIT_EMPTY's ("loadk", t) and ("loadv", t)."""
        buf, _ = self.slot(t, self.nb)
        for part in ("kv" if kind == "load" else kind[-1]):
            assert t < self.nb or t - self.nb in self.freed[part], f"{part} of tile {t} overwrites tile {t - self.nb}"
            self.loaded[part].append(t)
            self.count[part, buf] = self.count.get((part, buf), 0) + 1

    def check_done(self, n_tiles):
        for part in "kv":
            assert self.loaded[part] == list(range(n_tiles)) and self.freed[part] == set(range(n_tiles)), part


def _pick(rng, choices):
    """rng's pick of one of `choices`, as choices[rng.integers(len(choices))]; with one choice it draws nothing,
    as numpy's integers(1) draws no random bits either: the same interleavings, without a numpy call (~2 us) on
    every step of the simulations below."""
    return choices[0] if len(choices) == 1 else choices[rng.integers(len(choices))]


def _simulate_ring(rung, n_tiles, n_free, NUM_BUFFERS, ring_slot, rng, pingpong=False, turn_phase=None,
                   n_lower=0, consumer_ops=None, split=False):
    """The kernel's order of mbarrier waits, arrives and TMA loads as plain Python (see _consumer_ops; rungs
    3-4: a producer that waits for the empty barrier; rung 4: two consumers, each arriving once per tile on
    empty barriers of count 2, and under PINGPONG passing turns through two barriers of count 1), run under a
    random interleaving. Asserts that every wait passes on exactly the phase it means (not one phase early or
    late), no buffer is refilled before every consumer freed its tile, every loaded tile is consumed, and nothing
    deadlocks."""
    consumers = 2 if rung == 4 else 1
    count = {}                                   # completed phases per (kind, buffer)
    ring = _RingModel(count, NUM_BUFFERS, ring_slot, consumers, split)
    wait = lambda kind, t, c: _barrier_wait(count, kind, t, c, NUM_BUFFERS, ring_slot, turn_phase)

    agents = [(c, list(consumer_ops[c]) if consumer_ops else _consumer_ops(rung, n_tiles, n_free, pingpong, n_lower))
              for c in range(consumers)]
    if rung >= 3:
        agents.append((None, ring.producer_ops(n_tiles)))
    else:
        for t in range(min(NUM_BUFFERS, n_tiles)):
            ring.load("load", t)
    while any(ops for _, ops in agents):
        ready = []
        for c, ops in agents:
            if ops:
                kind, t = ops[0]
                if kind in UNWAITED or wait(kind, t, c):
                    ready.append((c, ops))
        assert ready, f"deadlock: {[(c, ops[:1]) for c, ops in agents]}"
        c, ops = _pick(rng, ready)
        kind, t = ops.pop(0)
        if kind in FREES:
            ring.free(kind, t)
            if rung < 3 and kind == "free" and t + NUM_BUFFERS < n_tiles:      # the predicated refill
                ring.load("load", t + NUM_BUFFERS)
        elif kind.startswith("load"):
            ring.load(kind, t)
        elif kind == "pass":                     # the other consumer's turn barrier completes a phase
            count["turn", 1 - c] = count.get(("turn", 1 - c), 0) + 1
    ring.check_done(n_tiles)
    if pingpong:
        assert count.get(("turn", 0), 0) == count.get(("turn", 1), 0), "each consumer took as many turns"


def test_split_ring_simulation_catches_a_producer_that_ignores_v_frees(monkeypatch):
    """The SPLIT_EMPTY simulation can fail: a producer that loads V after only K's empty barrier (tile t's V
    over tile t - NUM_BUFFERS's, which a consumer may still read) is caught."""
    import numpy as np
    honest = _RingModel.producer_ops
    monkeypatch.setattr(_RingModel, "producer_ops", lambda self, n, base=0: [
        op for op in honest(self, n, base) if op[0] != "ev"])
    rng = np.random.default_rng(0)
    with pytest.raises(AssertionError, match="overwrites"):
        for _ in range(20):
            _simulate_ring(4, 12, 10, 2, lambda t, nb: (t % nb, (t // nb) & 1), rng, True,
                           lambda t, c: (t & 1) ^ (1 - c), split=True)


RING_CASES = [(rung, nb, False) for rung in RUNGS for nb in (1, 2, 3)] + [(4, nb, True) for nb in (2, 3)]


@pytest.mark.parametrize("rung,NUM_BUFFERS,pingpong", RING_CASES,
                         ids=[f"r{r}-nb{nb}" + ("-pingpong" if pp else "") for r, nb, pp in RING_CASES])
@pytest.mark.parametrize("BLOCK_N", [128, 64])
@pytest.mark.parametrize("split", [False, True], ids=["", "split"])
def test_ring_phases_and_counts(hopper, rung, NUM_BUFFERS, pingpong, BLOCK_N, split):
    """The loads and waits of every query tile over the check's shapes, causal or not, under random
    interleavings (see _simulate_ring); rungs 2-4 need two buffers (the kernel static_asserts it). The key
    range is the 128-row program's (rung 4's two consumers both walk it). split: SPLIT_EMPTY (rungs 3-4)."""
    import numpy as np
    if rung > 1 and NUM_BUFFERS < 2:
        pytest.skip("rungs 2-4 wait for K of tile j before freeing tile j-1")
    if split and rung < 3:
        pytest.skip("SPLIT_EMPTY frees K and V to the producer partition of rungs 3-4")
    if BLOCK_N == 64 and (rung, pingpong) not in ((3, False), (4, False), (4, True)):
        pytest.skip("BLOCK_N 64 is checked on the warp-specialised rungs")
    rng = np.random.default_rng(0)
    BM, BN = 128, BLOCK_N
    for nq, nk in _tile_cases(BM, BN):
        for causal, window_left in ((False, -1), (True, -1), (True, 100), (True, 300)):
            for m_start in range(0, nq, BM):
                kv_start, free_start, free_end, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal,
                                                                         window_left)
                tiles = lambda key: -(-(key - kv_start) // BN)          # counted from the first key tile
                for _ in range(3):
                    _simulate_ring(rung, tiles(kv_end), tiles(free_end), NUM_BUFFERS, hopper.ring_slot, rng,
                                   pingpong, hopper.turn_phase, tiles(free_start), split=split)


def test_turn_indices_are_contiguous():
    """PINGPONG's turn numbers, as the kernel computes them per key range, run 0, 1, 2, ... over both ranges
    (a gap or a repeat would desynchronise the turn barriers' parities)."""
    for n_tiles in range(0, 7):
        for n_free in range(0, n_tiles + 1):
            for n_lower in range(0, n_free + 1):
                turns = [t for kind, t in _consumer_ops(4, n_tiles, n_free, True, n_lower) if kind == "turn"]
                ranges = (n_lower > 0) + (n_free > n_lower) + (n_tiles > n_free)
                assert turns == list(range(n_tiles + ranges)), (n_tiles, n_free, n_lower, turns)


# ------------------------------------------------------------------------------------------ PERSISTENT

def _simulate_persistent(rung, items, NUM_BUFFERS, ring_slot, rng, pingpong=False, turn_phase=None, split=False,
                         q_regs=False, q_ahead=False, q_lead=1, q_early=False, q_early_before="v", chain=False,
                         chain_turns=None):
    """A PERSISTENT program (rungs 3-4) over its work items [(n_tiles, n_free, n_lower), ...] as plain Python,
    under a random interleaving: the producer loads every item's tiles into one ring whose tile count runs on
    across items (each after the empty barrier), the consumers walk each item's tiles with `base` = the tiles of
    earlier items and turn numbers shifted by `turn_base` = their turns (_consumer_ops per item); each consumer
    waits for item i's Q (one buffer), loads item i + 1's Q once its last tile of item i is done, then
    store_wait(0) and stores item i's O from its O buffer (stores complete at random later times).
    Q_REGS: item i + 1's Q is loaded as soon as item i's is in registers (before its tiles). Q_AHEAD: two Q
    buffers, item i's in buffer i % 2, and item i + q_lead's loaded as soon as item i's has arrived (the kernel's
    q_lead is 1; a larger one is the mutant the model must catch). Q_EARLY: item i + 1's Q is loaded just before
    the wait for the V of item i's last P·V (q_early_before="v"; "k", before the last S, is the mutant), or after
    the item when it has no tiles. CHAIN_RANGES: an item's ranges are one pipeline (the ops of a single range)
    taking chain_turns(n_tiles) turns (the kernel's count; a wrong one is the mutant). SPLIT_EMPTY: see _RingModel. Asserts every wait
    passes on the phase it means, no Q buffer is reloaded while an item still reads it, no S completes after its
    consumer let go of its Q buffer (but under Q_REGS), no K/V buffer is refilled
    before both consumers freed it, no O buffer is staged while a store still reads it, every tile is loaded and
    consumed once, no deadlock."""
    consumers = 2 if rung == 4 else 1
    count = {}
    ring = _RingModel(count, NUM_BUFFERS, ring_slot, consumers, split)
    pending = {c: [] for c in range(consumers)}          # each consumer's O stores in flight (items)
    total_tiles = sum(item["n_tiles"] if isinstance(item, dict) else item[0] for item in items)

    q_slots = 2 if q_ahead else 1
    wait = lambda kind, t, c: _barrier_wait(count, kind, t, c, NUM_BUFFERS, ring_slot, turn_phase, q_slots)
    reading = {}                                         # (consumer, Q buffer) -> the item still reading it

    ops = {c: [] for c in range(consumers)}
    producer = []
    base = turn_base = 0
    for i, item in enumerate(items):
        if isinstance(item, dict):                       # OWN_RANGES: {"n_tiles", "ops": per consumer, "turns"}
            n_tiles, item_ops, item_turns = item["n_tiles"], item["ops"], item["turns"]
        else:
            n_tiles, n_free, n_lower = item
            if chain:
                item_ops = [_consumer_ops(rung, n_tiles, 0, pingpong, 0)] * consumers
                item_turns = chain_turns(0, n_tiles, 1)
            else:
                item_ops = [_consumer_ops(rung, n_tiles, n_free, pingpong, n_lower)] * consumers
                item_turns = n_tiles + (n_lower > 0) + (n_free > n_lower) + (n_tiles > n_free)
        for c in range(consumers):
            ops[c].append(("q", i))
            if q_ahead:                                  # items up to i + q_lead (the first item: all of them)
                ops[c] += [("qload", j) for j in range(1 if i == 0 else i + q_lead, i + q_lead + 1)
                           if j < len(items)]
            if q_regs:
                ops[c].append(("qdone", i))
                if i + 1 < len(items):
                    ops[c].append(("qload", i + 1))
            shifted = [(kind, t + (turn_base if kind in ("turn", "pass") else base)) for kind, t in item_ops[c]]
            q_next = [("qdone", i)] + ([("qload", i + 1)] if i + 1 < len(items) else [])
            if q_early and isinstance(item, dict):       # OWN_RANGES: item["early"][c], None without own tiles
                at = item["early"][c]
                shifted = shifted[:at] + q_next + shifted[at:] if at is not None else shifted + q_next
            elif q_early and any(kind == q_early_before for kind, _ in shifted):
                at = max(j for j, (kind, _) in enumerate(shifted) if kind == q_early_before)
                shifted[at:at] = q_next
            elif q_early:
                shifted += q_next
            ops[c] += shifted
            if not q_regs and not q_early:
                ops[c].append(("qdone", i))
            if not q_regs and not q_ahead and not q_early and i + 1 < len(items):
                ops[c].append(("qload", i + 1))
            ops[c] += [("store_wait", 0), ("store", i)]
        producer += ring.producer_ops(n_tiles, base)
        base, turn_base = base + n_tiles, turn_base + item_turns
    for c in range(consumers):
        ops[c] = ([("qload", 0)] if items else []) + ops[c] + [("store_wait", 0)]
    agents = [(c, ops[c]) for c in range(consumers)]
    agents.append((None, producer))
    agents.append(("stores", []))                        # completes the oldest store in flight, at random times
    while any(o for _, o in agents[:-1]) or any(pending.values()):
        ready = []
        for c, o in agents:
            if c == "stores":
                if any(pending.values()):
                    ready.append((c, o))
            elif o:
                kind, t = o[0]
                if kind == "store_wait":
                    if len(pending[c]) <= t:
                        ready.append((c, o))
                elif kind in UNWAITED + ("qload", "qdone", "store") or wait(kind, t, c):
                    ready.append((c, o))
        assert ready, f"deadlock: {[(c, o[:1]) for c, o in agents]}"
        if len(ready) > 1 and ready[-1][0] == "stores" and rng.random() < 0.9:
            ready.pop()                                  # stores are slow: they stay in flight for a while
        c, o = _pick(rng, ready)
        if c == "stores":
            busy = [k for k in pending if pending[k]]
            pending[_pick(rng, busy)].pop(0)
            continue
        kind, t = o.pop(0)
        if kind == "sdone" and not q_regs:
            assert any(key[0] == c for key in reading), f"S of tile {t} done after consumer {c} let go of its Q"
        if kind in FREES:
            ring.free(kind, t)
        elif kind.startswith("load"):
            ring.load(kind, t)
        elif kind == "pass":
            count["turn", 1 - c] = count.get(("turn", 1 - c), 0) + 1
        elif kind == "q":
            reading[c, t % q_slots] = t
        elif kind == "qdone":
            del reading[c, t % q_slots]
        elif kind == "qload":
            assert (c, t % q_slots) not in reading, \
                f"Q of item {t} overwrites item {reading[c, t % q_slots]}'s while it is read"
            count["q", c, t % q_slots] = count.get(("q", c, t % q_slots), 0) + 1
        elif kind == "store":
            assert not pending[c], f"O of item {t} staged while the store of item {pending[c][0]} reads the buffer"
            pending[c].append(t)
    ring.check_done(total_tiles)
    if pingpong:
        assert count.get(("turn", 0), 0) == count.get(("turn", 1), 0), "each consumer took as many turns"


PERSISTENT_CASES = [(3, 2, False), (4, 2, False), (4, 2, True), (4, 3, True)]


@pytest.mark.parametrize("rung,NUM_BUFFERS,pingpong", PERSISTENT_CASES,
                         ids=[f"r{r}-nb{nb}" + ("-pingpong" if pp else "") for r, nb, pp in PERSISTENT_CASES])
@pytest.mark.parametrize("split,q_regs,q_ahead,q_early,chain",
                         [(False, False, False, False, False), (True, False, False, False, False),
                          (False, True, False, False, False), (True, True, False, False, False),
                          (False, False, True, False, False), (True, False, True, False, False),
                          (False, False, False, True, False), (True, False, False, True, False),
                          (False, False, False, False, True), (True, False, False, False, True)],
                         ids=["", "split", "qregs", "split-qregs", "qahead", "split-qahead", "qearly", "split-qearly",
                              "chain", "split-chain"])
def test_persistent_ring_q_buffers_and_turns(hopper, rung, NUM_BUFFERS, pingpong, split, q_regs, q_ahead, q_early,
                                             chain):
    """Each program of a PERSISTENT launch over the check's shapes (several items per program, empty ones
    included: causal with N_Q > N_KV), causal or not, with and without a window: see _simulate_persistent
    (with SPLIT_EMPTY, Q_REGS, Q_AHEAD, Q_EARLY and CHAIN_RANGES too)."""
    import numpy as np
    rng = np.random.default_rng(1)
    BM, BN, H, programs = 128, 64, 2, 3
    for nq, nk in _tile_cases(BM, BN)[::2]:
        for causal, window_left in ((False, -1), (True, -1), (True, 100)):
            num_m = -(-nq // BM)
            paired = causal and window_left < 0                 # a window: units of one tile
            for pid in range(programs):
                items = []
                for k in range(hopper.item_count(pid, programs, num_m, H, paired)):
                    m_start = hopper.work_item(k, pid, programs, num_m, H, H, 1, causal, BM, paired)[4]
                    kv_start, free_start, free_end, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal,
                                                                             window_left)
                    if m_start >= nq:                        # a phantom tile: _item_range empties it
                        free_start = free_end = kv_end = kv_start
                    tiles = lambda key: -(-(key - kv_start) // BN)
                    items.append((max(tiles(kv_end), 0), tiles(free_end), tiles(free_start)))
                _simulate_persistent(rung, items, NUM_BUFFERS, hopper.ring_slot, rng, pingpong, hopper.turn_phase,
                                     split, q_regs, q_ahead, q_early=q_early, chain=chain,
                                     chain_turns=hopper.chain_turns)


def test_q_ahead_simulation_catches_a_load_two_items_ahead():
    """The Q_AHEAD model is not vacuous: with two Q buffers, loading item i + 2's Q when item i starts lands in
    item i's own buffer while it is read."""
    import numpy as np
    items = [(3, 2, 0)] * 4
    ring_slot = lambda t, nb: (t % nb, (t // nb) & 1)
    turn_phase = lambda turn, consumer: (turn & 1) ^ (1 - consumer)
    _simulate_persistent(4, items, 2, ring_slot, np.random.default_rng(0), True, turn_phase, q_ahead=True)
    with pytest.raises(AssertionError, match="overwrites item"):
        _simulate_persistent(4, items, 2, ring_slot, np.random.default_rng(0), True, turn_phase, q_ahead=True,
                             q_lead=2)


def test_q_early_simulation_catches_a_load_before_the_last_s():
    """The Q_EARLY model is not vacuous: loading the next item's Q before the last S = Q·Kᵀ of an item (at the
    wait for its K instead of its V) is caught, with one tile per item and with several."""
    import numpy as np
    ring_slot = lambda t, nb: (t % nb, (t // nb) & 1)
    turn_phase = lambda turn, consumer: (turn & 1) ^ (1 - consumer)
    for items in ([(1, 0, 0)] * 4, [(3, 2, 0)] * 4):
        _simulate_persistent(4, items, 2, ring_slot, np.random.default_rng(0), True, turn_phase, q_early=True)
        with pytest.raises(AssertionError, match="let go of its Q"):
            _simulate_persistent(4, items, 2, ring_slot, np.random.default_rng(0), True, turn_phase, q_early=True,
                                 q_early_before="k")


def test_chain_turns_are_the_single_range_ops_and_a_wrong_count_fails(hopper):
    """CHAIN_RANGES: an item of n key tiles takes one turn per tile and one for its last P·V (none when it has
    no tiles), which is what the ops of a single range take; the persistent model fails (a wait that never passes
    or a phase it does not mean) when the kernel's turn count is off by one."""
    for n in range(0, 6):
        ops = _consumer_ops(4, n, 0, True, 0)
        assert hopper.chain_turns(0, n * 64, 64) == len([op for op in ops if op[0] == "turn"]) == n + (n > 0)
    import numpy as np
    ring_slot = lambda t, nb: (t % nb, (t // nb) & 1)
    turn_phase = lambda turn, consumer: (turn & 1) ^ (1 - consumer)
    items = [(3, 2, 0), (1, 0, 0), (4, 3, 0), (2, 1, 0)]
    _simulate_persistent(4, items, 2, ring_slot, np.random.default_rng(0), True, turn_phase, split=True, chain=True,
                         chain_turns=hopper.chain_turns)
    off_by_one = lambda kv_start, kv_end, BLOCK_N: hopper.chain_turns(kv_start, kv_end, BLOCK_N) + 1
    with pytest.raises(AssertionError):
        _simulate_persistent(4, items, 2, ring_slot, np.random.default_rng(0), True, turn_phase, split=True,
                             chain=True, chain_turns=off_by_one)


def test_unshipped_options_are_in_no_table():
    """No config of the committed tables (prefill families and windows, every GPU with a table, read as the
    dispatcher reads them) sets an UNSHIPPED option, so the compiles that only FA2_GLUON_ALL=1 runs are of kernels no
    user gets; shipping one fails this first."""
    from fa2.gluon import dispatch
    devices = dispatch.shipped_devices()
    configs = [dict(entry["config"]) for device in devices
               for entry in dispatch.shipped_families(device) + dispatch.shipped_windows(device) if entry.get("config")]
    assert "NVIDIA H200" in devices and len(configs) >= 10, (devices, len(configs))
    used = {flag for config in configs for flag, value in config.items() if value and flag in UNSHIPPED}
    assert not used, used


def test_shipped_devices_are_the_tables_on_disk():
    """shipped_devices names each *.gluon.json under fa2/configs by its device, and each name leads back to its
    file (table_file_name), so no table is left out of the test above."""
    from fa2.chapters.autotune import SHIPPED_DIR
    from fa2.gluon import dispatch
    files = sorted(path.name for path in SHIPPED_DIR.glob("*.gluon.json"))
    assert files and sorted(dispatch.table_file_name(d) for d in dispatch.shipped_devices()) == files


def test_the_option_tests_compile_shipped_configs():
    """MONEY and SHORT_CAUSAL are rung-4 configs of the H200 table's families, SCHEDULED_WINDOW one of its windows',
    so what CI compiles here without FA2_GLUON_ALL is what users run."""
    from fa2.gluon import dispatch
    rung4 = lambda entries: [dict(e["config"]) for e in entries if e.get("rung") == 4 and e.get("config")]
    families, windows = (rung4(dispatch.shipped_families("NVIDIA H200")),
                         rung4(dispatch.shipped_windows("NVIDIA H200")))
    assert MONEY in families and SHORT_CAUSAL in families, families
    assert SCHEDULED_WINDOW in windows, windows


def test_chain_ranges_is_checked(hopper):
    """CHAIN_RANGES needs rungs 2-4 and excludes OWN_RANGES, Q_AHEAD and Q_EARLY (host checks; the kernel
    static_asserts them)."""
    for rung, extra, match in ((1, {}, "rung"), (4, {"OWN_RANGES": 1}, "OWN_RANGES"),
                               (4, {"PERSISTENT": 1, "Q_AHEAD": 1}, "Q_AHEAD"),
                               (4, {"PERSISTENT": 1, "Q_EARLY": 1}, "Q_EARLY")):
        with pytest.raises(ValueError, match=match):
            hopper.rung_config(rung, 128, dict(extra, CHAIN_RANGES=1))


@unshipped_compile
def test_chain_ranges_compiles(hopper):
    """The money shot's config compiles with CHAIN_RANGES for sm_90, causal, in the same shared memory, and its PTX
    changes (the ranges are no longer drained one by one). One compile, without a window."""
    without = hopper.compile_rung(4, 128, torch.bfloat16, True, config=MONEY)
    chained = hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(MONEY, CHAIN_RANGES=1))
    assert chained.metadata.shared == without.metadata.shared
    assert chained.asm["ptx"] != without.asm["ptx"]


def _refused(hopper, flag, cases):
    """rung_config refuses `flag` on rung 4 with each (config, message) of `cases`, naming what is wrong."""
    for extra, match in cases:
        with pytest.raises(ValueError, match=match):
            hopper.rung_config(4, 128, dict(extra, **{flag: 1}))


def _without_and_with(hopper, config, flag, window=False):
    """Rung 4 (D = 128, bf16, causal) compiled for sm_90 with `config`, without `flag` and with it; the latter
    spills nothing and takes the same shared memory."""
    without = hopper.compile_rung(4, 128, torch.bfloat16, True, config=config, window=window)
    flagged = hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(config, **{flag: 1}), window=window)
    usage = hopper.resource_usage(flagged)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    assert usage["shared"] == without.metadata.shared
    return without, flagged


def test_q_early_is_checked(hopper):
    """Q_EARLY needs PERSISTENT and excludes Q_REGS and Q_AHEAD (host checks; the kernel static_asserts them);
    with OWN_RANGES and with TABLE_AHEAD it is a config."""
    _refused(hopper, "Q_EARLY", (({}, "PERSISTENT"), ({"PERSISTENT": 1, "Q_REGS": 1}, "Q_REGS"),
                                 ({"PERSISTENT": 1, "Q_AHEAD": 1}, "Q_AHEAD")))
    assert hopper.rung_config(4, 128, dict(SHORT_CAUSAL, Q_EARLY=1))["Q_EARLY"]


@unshipped_compile
def test_q_early_compiles(hopper):
    """The money shot's config and the (32, 32, 512, 128) causal one (OWN_RANGES, TABLE_AHEAD) compile with Q_EARLY
    for sm_90 without spills, in the same shared memory (one Q buffer per consumer still), and their PTX has more
    Q load sites (in each range that can be an item's last, and the fallback after an item without own key
    tiles) than without."""
    loads = lambda k: k.asm["ptx"].count("cp.async.bulk.tensor.4d.shared::cluster.global")
    for config in (MONEY, SHORT_CAUSAL):
        without, early = _without_and_with(hopper, config, "Q_EARLY")
        assert loads(early) > loads(without), (loads(early), loads(without))


def test_o_direct_is_checked(hopper):
    """O_DIRECT needs PERSISTENT (host check; the kernel static_asserts it)."""
    _refused(hopper, "O_DIRECT", (({}, "PERSISTENT"),))


@unshipped_compile
def test_o_direct_frees_the_o_buffers(hopper):
    """With O_DIRECT the table's persistent config at (32, 32, 512, 128) before 0.3.13 compiles for sm_90 without
    spills, O leaves through global stores and no TMA store, and the room the O staging buffers held takes a third
    128-key K/V buffer (64 KB more) within an H100's shared memory. Without the flag the kernel is unchanged but for
    its last run-time parameter, o_ptr (its PTX was compared when the flag was added)."""
    config = dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                  SPLIT_EMPTY=1, HALF_DIAGONAL=1, O_DIRECT=1)
    direct = hopper.compile_rung(4, 128, torch.bfloat16, True, config=config)
    usage = hopper.resource_usage(direct)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    assert "cp.async.bulk.tensor.4d.global.shared::cta" not in direct.asm["ptx"] and "st.global" in direct.asm["ptx"]
    deeper = hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(config, NUM_BUFFERS=3))
    extra = deeper.metadata.shared - direct.metadata.shared      # one K and one V tile, and their barriers
    assert 2 * 128 * 128 * 2 <= extra < 2 * 128 * 128 * 2 + 128, extra
    assert deeper.metadata.shared <= H100_SHARED
    assert [p.name for p in hopper._attention_fwd_hopper.params][13] == "o_ptr"


def test_o_in_q_is_checked(hopper):
    """O_IN_Q needs PERSISTENT and excludes O_DIRECT, Q_REGS, Q_AHEAD and Q_EARLY (host checks; the kernel
    static_asserts them)."""
    _refused(hopper, "O_IN_Q", (({}, "PERSISTENT"),) + tuple(
        ({"PERSISTENT": 1, flag: 1}, flag) for flag in ("O_DIRECT", "Q_REGS", "Q_AHEAD", "Q_EARLY")))
    assert hopper.rung_config(4, 128, dict(SHORT_CAUSAL, O_IN_Q=1))["O_IN_Q"]


@unshipped_compile
def test_o_in_q_frees_the_o_buffers(hopper):
    """With O_IN_Q the (32, 32, 512, 128) causal config compiles for sm_90 without spills in the shared memory of
    its two O staging buffers less (16 KB each: 64 rows of 128 bf16), and that room takes a sixth 64-key K/V buffer
    within an H100's shared memory."""
    plain = hopper.compile_rung(4, 128, torch.bfloat16, True, config=SHORT_CAUSAL).metadata.shared
    in_q = hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(SHORT_CAUSAL, O_IN_Q=1))
    usage = hopper.resource_usage(in_q)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    freed = plain - usage["shared"]                  # the two O tiles (and their alignment)
    assert 2 * 64 * 128 * 2 <= freed < 2 * 64 * 128 * 2 + 128, (plain, usage["shared"])
    deeper = hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(SHORT_CAUSAL, O_IN_Q=1, NUM_BUFFERS=6))
    assert deeper.metadata.shared <= H100_SHARED


def test_late_epilogue_is_checked(hopper):
    """LATE_EPILOGUE needs PERSISTENT and excludes the options that change an item's way out or its loops (host
    checks; the kernel static_asserts them)."""
    _refused(hopper, "LATE_EPILOGUE", (({}, "PERSISTENT"),) + tuple(
        ({"PERSISTENT": 1, flag: 1}, flag) for flag in ("O_DIRECT", "O_IN_Q", "Q_AHEAD", "CHAIN_RANGES",
                                                        "SWAP_ROWS", "ONE_LOOP")))
    _refused(hopper, "LATE_EPILOGUE", (({"PERSISTENT": 1, "BLOCK_N": 128, "HALF_DIAGONAL": 1}, "HALF_DIAGONAL"),))
    config = dict(SHORT_CAUSAL_WITHOUT_TABLE_AHEAD, Q_REGS=1, LATE_EPILOGUE=1)
    assert hopper.rung_config(4, 128, config)["LATE_EPILOGUE"]


@unshipped_compile
def test_late_epilogue_compiles_and_moves_the_store(hopper):
    """With Q_REGS, LATE_EPILOGUE (32, 32, 512, 128) causal's config compiles for sm_90 without spills in the same
    shared memory, still one TMA store of O per item (now also one after the item loop: the last item's), and the
    plain config's PTX is unchanged but for debug info (compared when the flag was added)."""
    config = dict(SHORT_CAUSAL_WITHOUT_TABLE_AHEAD, Q_REGS=1)
    without, late = _without_and_with(hopper, config, "LATE_EPILOGUE")
    store = "cp.async.bulk.tensor.4d.global.shared::cta"
    assert without.asm["ptx"].count(store) >= 1
    assert late.asm["ptx"].count(store) > without.asm["ptx"].count(store)


def test_q_ahead_is_checked(hopper):
    """Q_AHEAD needs PERSISTENT and excludes Q_REGS (host checks; the kernel static_asserts both)."""
    with pytest.raises(ValueError, match="PERSISTENT"):
        hopper.rung_config(4, 128, {"Q_AHEAD": 1})
    with pytest.raises(ValueError, match="Q_REGS"):
        hopper.rung_config(4, 128, {"Q_AHEAD": 1, "Q_REGS": 1, "PERSISTENT": 1})


@unshipped_compile
def test_q_ahead_compiles(hopper):
    """The money shot's persistent config compiles with Q_AHEAD for sm_90 without spills, within the H100's shared
    memory with two 16 KB Q buffers per consumer more. One compile, without a window."""
    config = dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1, PRODUCER_REGS=32, SPLIT_EMPTY=1)
    without = hopper.compile_rung(4, 128, torch.bfloat16, True, config=config).metadata.shared
    usage = hopper.resource_usage(hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(config, Q_AHEAD=1)))
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage
    assert usage["shared"] - without >= 2 * 16 * 1024 and usage["shared"] <= H100_SHARED, usage


def test_persistent_work_items_cover_every_tile_once_longest_first(hopper):
    """Over the programs of a PERSISTENT launch the work items are every (query tile, batch·head) once, plus
    paired (causal, no window) with an odd number of query tiles one phantom per head (m_start past N_Q), unit
    by unit head by head; paired, each unit is a head's k-th longest tile, then its k-th shortest; causal with a
    window (unpaired), one tile a unit, a head's tiles longest first."""
    for num_m, B, H, group, nprog in ((1, 1, 1, 1, 1), (5, 2, 4, 2, 3), (16, 8, 32, 4, 132), (128, 1, 16, 1, 132),
                                      (3, 1, 5, 1, 132), (7, 3, 7, 7, 132)):
        for causal, paired in ((False, False), (True, True), (True, False)):
            units = hopper.units(num_m, B * H, paired)
            programs = min(nprog, units)
            seen = []
            for p in range(programs):
                items = [hopper.work_item(k, p, programs, num_m, B * H, H, group, causal, 128, paired)
                         for k in range(hopper.item_count(p, programs, num_m, B * H, paired))]
                if paired:
                    for first, second in zip(items[::2], items[1::2]):
                        assert first[3] == second[3]                                    # long, then short
                        assert first[4] > second[4] or second[4] == num_m * 128        # (or a phantom)
                seen += items
            real = [(item[3], item[4]) for item in seen if item[4] < num_m * 128]
            assert sorted(real) == [(bh, m * 128) for bh in range(B * H) for m in range(num_m)]
            assert len(seen) - len(real) == (B * H if paired and num_m % 2 else 0)     # phantoms
            if causal and not paired:      # program p's k-th unit u = p + k·programs: head u // num_m, longest first
                for p in range(programs):
                    for k in range(hopper.item_count(p, programs, num_m, B * H, False)):
                        u = p + k * programs
                        item = hopper.work_item(k, p, programs, num_m, B * H, H, group, True, 128, False)
                        assert (item[3], item[4]) == (u // num_m, (num_m - 1 - u % num_m) * 128)
            for off_b, off_h, off_kvh, pid_bh, m_start in seen:
                assert (off_b, off_h, off_kvh) == (pid_bh // H, pid_bh % H, (pid_bh % H) // group)


def _split_tail_items(hopper, num_m, BH, H, programs, split_tail):
    """Every program's (pid_bh, m_start) items of a paired PERSISTENT launch, with or without SPLIT_TAIL."""
    return [[hopper.work_item(k, p, programs, num_m, BH, H, 1, True, 128, True, split_tail)[3:]
             for k in range(hopper.item_count(p, programs, num_m, BH, True, split_tail))] for p in range(programs)]


@pytest.mark.parametrize("num_m,B,H,nprog", [(1, 1, 1, 1), (5, 2, 4, 3), (16, 8, 32, 132), (4, 32, 32, 132),
                                             (3, 1, 5, 132), (7, 3, 7, 132), (4, 2, 33, 132), (64, 1, 32, 132),
                                             (2, 1, 200, 132), (9, 2, 9, 10)])
def test_split_tail_covers_every_tile_once_and_keeps_the_whole_rounds(hopper, num_m, B, H, nprog):
    """SPLIT_TAIL (the kernel's _tail_item, its host twin tail_item): a paired launch's items are still every
    (query tile, batch·head) once plus one phantom per head with an odd num_m; every whole round is the paired
    launch's, item for item; in a split last round no program takes two longest tiles, and one that takes two
    tiles takes two shortest ones (a last round of more than two thirds of the programs stays in pairs); and no
    program has more key tiles than the busiest of the paired launch (cost: item_costs, 128-key tiles)."""
    BH = B * H
    programs = min(nprog, hopper.units(num_m, BH, True))
    split = _split_tail_items(hopper, num_m, BH, H, programs, True)
    pairs = _split_tail_items(hopper, num_m, BH, H, programs, False)
    real = sorted(item for row in split for item in row if item[1] < num_m * 128)
    assert real == [(bh, m * 128) for bh in range(BH) for m in range(num_m)]
    assert sum(map(len, split)) == sum(map(len, pairs))                        # phantoms included, as before
    whole = hopper.units(num_m, BH, True) // programs
    costs = hopper.item_costs(num_m, num_m * 128, num_m * 128, 128, 128, True)
    load = lambda row: sum(costs[m // 128] for _, m in row if m < num_m * 128)
    last = hopper.units(num_m, BH, True) % programs
    for p in range(programs):
        assert split[p][:2 * whole] == pairs[p][:2 * whole]
        tail = [m // 128 for _, m in split[p][2 * whole:]]
        if not hopper.tail_split(last, programs):     # more than 2/3 of the programs in the last round: pairs
            assert split[p] == pairs[p]
        elif len(tail) == 2:                          # two of the last round's shortest tiles
            assert max(tail) < -(-num_m // 2) or num_m == 1
    assert max(map(load, split)) <= max(map(load, pairs))


def test_split_tail_evens_the_last_round_at_the_short_headline_shape(hopper):
    """(32, 32, 512, 128) causal: 2048 pairs over 132 programs leave 68 in the last round. In the cost model
    (item_costs, as SCHEDULED's tables are planned) the paired launch's busiest program has 3.1 % more work than
    the mean; with SPLIT_TAIL 1.3 %, as much as the host-planned last round of SCHEDULED=2 (paired_schedule_table)."""
    num_m, BH, programs = 4, 1024, 132
    costs = hopper.item_costs(num_m, 512, 512, 128, 128, True)
    loads = {split: [sum(costs[m // 128] for _, m in row)
                     for row in _split_tail_items(hopper, num_m, BH, 32, programs, split)]
             for split in (False, True)}
    mean = sum(loads[True]) / programs
    planned = hopper.paired_schedule_table(costs, BH, programs)
    planned_loads = _program_loads(hopper, planned, programs, num_m, 32, costs)
    assert max(loads[False]) >= 1.03 * mean and max(loads[True]) <= 1.013 * mean
    assert max(loads[True]) == max(planned_loads)


@pytest.mark.parametrize("pingpong", [False, True])
def test_split_tail_runs_the_ring_of_a_persistent_program(hopper, pingpong):
    """The ring simulation (_simulate_persistent: K/V ring, Q and O buffers, turns) over programs whose items
    are SPLIT_TAIL's, last round included, at shapes with a partial last round and phantom tiles."""
    import numpy as np
    rng = np.random.default_rng(3)
    BM, BN = 128, 128
    for nq, B, H, programs in ((512, 2, 5, 3), (640, 1, 7, 4), (1000, 3, 3, 5)):
        num_m = -(-nq // BM)
        for row in _split_tail_items(hopper, num_m, B * H, H, programs, True):
            items = []
            for _, m_start in row:
                kv_start, free_start, free_end, kv_end = hopper.kv_range(m_start, nq, nq, BM, BN, True)
                if m_start >= nq:
                    free_start = free_end = kv_end = kv_start
                tiles = lambda key: -(-(key - kv_start) // BN)
                items.append((max(tiles(kv_end), 0), tiles(free_end), tiles(free_start)))
            _simulate_persistent(4, items, 2, hopper.ring_slot, rng, pingpong, hopper.turn_phase, True)


def test_split_tail_is_checked(hopper):
    """SPLIT_TAIL needs PERSISTENT and excludes SCHEDULED and Q_AHEAD (host checks; the kernel static_asserts
    them)."""
    _refused(hopper, "SPLIT_TAIL", (({}, "PERSISTENT"), ({"PERSISTENT": 1, "SCHEDULED": 1}, "SCHEDULED"),
                                    ({"PERSISTENT": 1, "Q_AHEAD": 1}, "Q_AHEAD")))


@unshipped_compile
def test_split_tail_compiles(hopper):
    """The table's persistent config compiles with SPLIT_TAIL for sm_90 without spills and in the same shared
    memory, and its PTX differs (the last round's items)."""
    without, tail = _without_and_with(hopper, MONEY, "SPLIT_TAIL")
    assert tail.asm["ptx"] != without.asm["ptx"]


def test_swap_rows_is_checked(hopper):
    """SWAP_ROWS needs rung 4 and PERSISTENT and excludes OWN_RANGES, Q_REGS, Q_AHEAD, Q_EARLY and CHAIN_RANGES
    (host checks; the kernel static_asserts them)."""
    persistent = {"PERSISTENT": 1}
    _refused(hopper, "SWAP_ROWS", [({}, "PERSISTENT")] + [(dict(persistent, **{flag: 1}), flag) for flag in
                                                           ("OWN_RANGES", "Q_REGS", "Q_AHEAD", "Q_EARLY",
                                                            "CHAIN_RANGES")])
    with pytest.raises(ValueError, match="rung 4"):
        hopper.rung_config(3, 128, dict(BLOCK_M=64, PERSISTENT=1, SWAP_ROWS=1))


@unshipped_compile
def test_swap_rows_compiles(hopper):
    """The (32, 32, 512, 128) table config compiles with SWAP_ROWS for sm_90 without spills and in the same shared
    memory, and its PTX differs (the rows an item's Q load, mask and O store use, and consumer 1 gets the halved
    diagonal tile's code)."""
    config = dict(BLOCK_N=128, NUM_BUFFERS=2, PERSISTENT=1, SCHEDULED=2, TABLE_AHEAD=1, PRODUCER_REGS=32,
                  SPLIT_EMPTY=1, HALF_DIAGONAL=1)
    without, swapped = _without_and_with(hopper, config, "SWAP_ROWS")
    assert swapped.asm["ptx"] != without.asm["ptx"]


def test_one_loop_is_checked(hopper):
    """ONE_LOOP needs PERSISTENT and excludes OWN_RANGES, Q_AHEAD, Q_EARLY and CHAIN_RANGES (host checks; the
    kernel static_asserts them)."""
    persistent = {"PERSISTENT": 1}
    _refused(hopper, "ONE_LOOP", [({}, "PERSISTENT")] + [(dict(persistent, **{flag: 1}), flag) for flag in
                                                          ("OWN_RANGES", "Q_AHEAD", "Q_EARLY", "CHAIN_RANGES")])


@unshipped_compile
def test_one_loop_compiles(hopper):
    """The money shot's config compiles with ONE_LOOP (1: masked tiles picked at run time; 2: every tile masked)
    for sm_90 without spills and in the same shared memory, and the three PTXs differ (the (32, 32, 512, 128) table
    config with ONE_LOOP=1 spills 28 bytes: book/results/gluon_resources.csv); under a window, whose three ranges it
    leaves as they are, the PTX is the same as without it."""
    money = dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1, PRODUCER_REGS=32, SPLIT_EMPTY=1)
    without, one = _without_and_with(hopper, money, "ONE_LOOP")
    masked = hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(money, ONE_LOOP=2))
    usage = hopper.resource_usage(masked)
    assert usage["spill_stores"] == 0 and usage["shared"] == without.metadata.shared, usage
    assert len({without.asm["ptx"], one.asm["ptx"], masked.asm["ptx"]}) == 3
    windowed = [hopper.compile_rung(4, 128, torch.bfloat16, True, config=dict(money, ONE_LOOP=flag), window=True)
                for flag in (0, 1)]
    assert windowed[0].asm["ptx"] == windowed[1].asm["ptx"]


@pytest.mark.parametrize("B,H,N", [(8, 32, 2048), (1, 32, 8192), (32, 32, 512), (8, 16, 2048), (1, 16, 16384),
                                   (1, 16, 32768), (2, 4, 1000), (1, 2, 300)])
def test_persistent_causal_programs_get_even_work(hopper, B, H, N):
    """Causal query tiles differ in length; pairing a head's k-th longest with its k-th shortest gives every
    program of a PERSISTENT launch (132 SMs, 128-row tiles, 64-key tiles) nearly the same number of key tiles:
    the busiest at most one unit more than the mean. (Round-robin over single tiles, every program's tiles a
    stride of 132 apart, gave the busiest about 3x the least busy at (1, 16, 16384).)"""
    BM, BN, nprog = 128, 64, 132
    num_m = -(-N // BM)
    programs = min(nprog, hopper.units(num_m, B * H, True))
    work = []
    for p in range(programs):
        tiles = 0
        for k in range(hopper.item_count(p, programs, num_m, B * H, True)):
            m_start = hopper.work_item(k, p, programs, num_m, B * H, H, 1, True, BM)[4]
            if m_start < N:
                kv_start, _, _, kv_end = hopper.kv_range(m_start, N, N, BM, BN, True)
                tiles += -(-(kv_end - kv_start) // BN)
        work.append(tiles)
    unit = 2 * (num_m + 1)                       # key tiles of one unit: (num_m - r) + (r + 1) query tiles' worth
    assert max(work) <= sum(work) / len(work) + unit, (max(work), sum(work) / len(work), unit)
    assert max(work) <= 1.12 * sum(work) / len(work) or programs * 4 > hopper.units(num_m, B * H, True)


# ------------------------------------------------------------------------------------------ SCHEDULED

SCHEDULED_CASES = [(1, 1, 1, 128, 128, 128, True, -1), (2, 4, 2, 1000, 1000, 64, True, -1),
                   (1, 4, 1, 1100, 1000, 64, True, -1),          # causal: the first 100 rows see no key
                   (8, 32, 8, 2048, 2048, 64, True, -1), (1, 16, 16, 32768, 32768, 128, True, 4096),
                   (2, 4, 4, 300, 300, 64, True, 37), (3, 5, 5, 640, 700, 128, False, -1),
                   (1, 2, 2, 130, 4000, 64, False, -1)]


def _scheduled_launch(hopper, B, H, N_Q, N_KV, BLOCK_N, causal, window_left, programs=132):
    """(table, nprog, num_m, costs) of a SCHEDULED launch with 128-row query tiles on `programs` SMs."""
    num_m = -(-N_Q // 128)
    nprog = min(programs, num_m * B * H)
    costs = hopper.item_costs(num_m, N_Q, N_KV, 128, BLOCK_N, causal, window_left)
    return hopper.schedule_table(costs, B * H, nprog, causal), nprog, num_m, costs


@pytest.mark.parametrize("B,H,Hkv,N_Q,N_KV,BLOCK_N,causal,window_left", SCHEDULED_CASES)
def test_scheduled_table_covers_every_tile_once(hopper, B, H, Hkv, N_Q, N_KV, BLOCK_N, causal, window_left):
    """A SCHEDULED launch's table, read as the kernel reads it (scheduled_item), hands out every (batch·head,
    query tile) exactly once, with the right (batch, head, kv head); its offsets are non-decreasing and end at
    the item count; within a program the items of a head come longest first under causal."""
    table, nprog, num_m, costs = _scheduled_launch(hopper, B, H, N_Q, N_KV, BLOCK_N, causal, window_left)
    offsets = table[:nprog + 1].tolist()
    assert offsets[0] == 0 and offsets[-1] == num_m * B * H == len(table) - nprog - 1
    assert all(a <= b for a, b in zip(offsets, offsets[1:]))
    seen = []
    for p in range(nprog):
        items = [hopper.scheduled_item(table, k, p, nprog, num_m, H, H // Hkv, 128)
                 for k in range(offsets[p + 1] - offsets[p])]
        for off_b, off_h, off_kvh, pid_bh, m_start in items:
            assert (off_b, off_h, off_kvh) == (pid_bh // H, pid_bh % H, (pid_bh % H) // (H // Hkv))
        seen += [(item[3], item[4]) for item in items]
    assert sorted(seen) == [(bh, m * 128) for bh in range(B * H) for m in range(num_m)]


@pytest.mark.parametrize("B,H,N,BLOCK_N,window_left", [(8, 32, 2048, 64, -1), (1, 32, 8192, 64, -1),
                                                       (32, 32, 512, 64, -1), (8, 16, 2048, 64, -1),
                                                       (1, 16, 16384, 64, -1), (4, 32, 4096, 128, -1),
                                                       (1, 16, 32768, 128, 4096), (1, 16, 32768, 64, 4096)])
def test_scheduled_programs_end_together(hopper, B, H, N, BLOCK_N, window_left):
    """In the cost model (item_costs) the busiest of 132 programs has at most 1.5 % more work than the mean at
    chapter 6's causal headline shapes and the window problem (paired units: 3.1 % at the first five); and the
    modelled start of every item is within two items' cost of where list scheduling in plain head-major order
    would start it -- tiles that run at one time stay neighbours, and share their heads' K and V in L2."""
    table, nprog, num_m, costs = _scheduled_launch(hopper, B, H, N, N, BLOCK_N, True, window_left)
    loads = []
    for p in range(nprog):
        count = int(table[p + 1] - table[p])
        loads.append(sum(costs[hopper.scheduled_item(table, k, p, nprog, num_m, H, 1, 128)[4] // 128]
                         for k in range(count)))
    mean = sum(loads) / len(loads)
    assert max(loads) <= 1.015 * mean, (max(loads), mean)
    # no item is dealt far from its place in head-major order: its program's load before it
    starts = {}
    for p in range(nprog):
        load = 0
        for k in range(int(table[p + 1] - table[p])):
            item = hopper.scheduled_item(table, k, p, nprog, num_m, H, 1, 128)
            starts[(item[3], item[4] // 128)] = load
            load += costs[item[4] // 128]
    heads_done = [min(starts[(bh, m)] for m in range(num_m)) for bh in range(B * H)]
    assert all(a <= b + 2 * max(costs) for a, b in zip(heads_done, heads_done[1:]))


def _program_loads(hopper, table, nprog, num_m, H, costs):
    """Each program's modelled work (item_costs) in a SCHEDULED table, read as the kernel reads it."""
    return [sum(costs[hopper.scheduled_item(table, k, p, nprog, num_m, H, 1, 128)[4] // 128]
                for k in range(int(table[p + 1] - table[p]))) for p in range(nprog)]


@pytest.mark.parametrize("B,H,N_Q,N_KV,BLOCK_N", [(32, 32, 512, 512, 128), (8, 32, 2048, 2048, 128),
                                                  (1, 32, 8192, 8192, 128), (8, 16, 2048, 2048, 64),
                                                  (3, 5, 1100, 1000, 128), (2, 4, 1000, 1000, 64),
                                                  (1, 1, 300, 300, 64)])
def test_paired_schedule_table_keeps_the_pairs_and_plans_the_last_round(hopper, B, H, N_Q, N_KV, BLOCK_N):
    """SCHEDULED=2's table (paired_schedule_table) hands out every real query tile once; every whole round is the
    paired launch's (_work_item PAIRED: program p's first items are its units p, p + nprog, ... in the kernel's
    order, when both launches run as many programs); and its busiest program has no more modelled work than the
    paired launch's, and at most 1.3 % more than the mean at (32, 32, 512, 128), where the pairs leave 3.1 %."""
    num_m = -(-N_Q // 128)
    nprog = min(132, num_m * B * H)                  # gluon_launch: a SCHEDULED launch's programs
    costs = hopper.item_costs(num_m, N_Q, N_KV, 128, BLOCK_N, True)
    table = hopper.paired_schedule_table(costs, B * H, nprog)
    offsets = table[:nprog + 1].tolist()
    items = [[hopper.scheduled_item(table, k, p, nprog, num_m, H, 1, 128)[3:] for k in range(b - a)]
             for p, (a, b) in enumerate(zip(offsets, offsets[1:]))]
    assert sorted(item for row in items for item in row) == [(bh, m * 128) for bh in range(B * H)
                                                              for m in range(num_m)]
    paired_nprog = min(132, hopper.units(num_m, B * H, True))
    paired = [[hopper.work_item(k, p, paired_nprog, num_m, B * H, H, 1, True, 128)[3:]
               for k in range(hopper.item_count(p, paired_nprog, num_m, B * H, True))] for p in range(paired_nprog)]
    paired = [[item for item in row if item[1] < num_m * 128] for row in paired]       # no phantom tiles
    if paired_nprog == nprog:
        whole = hopper.units(num_m, B * H, True) // nprog * (2 if num_m > 1 else 1)
        for p in range(nprog):
            assert items[p][:whole] == paired[p][:whole]
    loads = _program_loads(hopper, table, nprog, num_m, H, costs)
    paired_loads = [sum(costs[m // 128] for _, m in row) for row in paired]
    assert max(loads) <= max(paired_loads)
    if (B, H, N_Q) == (32, 32, 512):
        mean = sum(loads) / nprog
        assert max(loads) <= 1.013 * mean and max(paired_loads) >= 1.03 * mean, (max(loads), mean, max(paired_loads))


def test_scheduled_2_launch_passes_the_paired_table(hopper, monkeypatch):
    """gluon_launch with SCHEDULED=2: causal without a window, the table is paired_schedule_table's (the kernel
    itself compiles as for SCHEDULED=1); with a window or without causal, schedule_table's."""
    monkeypatch.setattr(hopper, "_sm_count", lambda device: 132)
    q = torch.zeros(4, 40, 1000, 64, dtype=torch.bfloat16)
    config = dict(BLOCK_N=64, NUM_BUFFERS=3, PERSISTENT=1, SCHEDULED=2, PRODUCER_REGS=32)
    launch = lambda causal, window_left=-1: hopper.gluon_launch(q, q, q, torch.empty_like(q), causal, 0.125, 4, config,
                                                                window_left=window_left)
    grid, _, scalars, constexprs, _ = launch(True)
    costs = hopper.item_costs(8, 1000, 1000, 128, 64, True)
    assert grid == (132, 1, 1) and constexprs["SCHEDULED"] is True
    assert torch.equal(scalars[-1], hopper.paired_schedule_table(costs, 160, 132))
    assert not torch.equal(scalars[-1], hopper.schedule_table(costs, 160, 132, True))
    _, _, scalars, _, _ = launch(True, 100)
    window_costs = hopper.item_costs(8, 1000, 1000, 128, 64, True, 100)
    assert torch.equal(scalars[-1], hopper.schedule_table(window_costs, 160, 132, True))
    _, _, scalars, _, _ = launch(False)
    assert torch.equal(scalars[-1], hopper.schedule_table(hopper.item_costs(8, 1000, 1000, 128, 64, False), 160, 132,
                                                          False))


@pytest.mark.parametrize("B,H,Hkv,N_Q,N_KV,BLOCK_N,causal,window_left", SCHEDULED_CASES)
def test_table_ahead_reads_each_entry_inside_the_table(hopper, B, H, Hkv, N_Q, N_KV, BLOCK_N, causal, window_left):
    """TABLE_AHEAD: the entries a program reads an item ahead (k = 0 .. its item count, the last one past its row)
    are scheduled_item's units for its items, every index read lies inside the table (the read past a program's
    last item is masked: the last program's would be one past the end), and a program with no items reads
    nothing."""
    table, nprog, num_m, costs = _scheduled_launch(hopper, B, H, N_Q, N_KV, BLOCK_N, causal, window_left)
    for p in range(nprog):
        row, n_items = int(table[p]), int(table[p + 1] - table[p])
        for k in range(n_items + 1):
            u, index = hopper.table_entry(table, nprog, row, k, n_items)
            if k == n_items:
                assert (u, index) == (0, None)
                continue
            assert 0 <= index < len(table)
            pid_bh, m_start = hopper.scheduled_item(table, k, p, nprog, num_m, H, H // Hkv, 128)[3:]
            assert u == pid_bh * num_m + m_start // 128
    assert nprog + 1 + int(table[nprog - 1]) + int(table[nprog] - table[nprog - 1]) == len(table)


def test_table_ahead_is_checked_and_compiles(hopper):
    """TABLE_AHEAD needs SCHEDULED and excludes Q_AHEAD and Q_REGS (host checks; the kernel
    static_asserts them); the shipped config that uses it (N = 512 causal: 64-key tiles, 5 buffers, the paired
    schedule) compiles for sm_90 without spills, in the same shared memory as without it, and its PTX differs (the
    table is read in other places). The windowed compiles: test_table_ahead_compiles_with_a_window."""
    scheduled = {"PERSISTENT": 1, "SCHEDULED": 1}
    _refused(hopper, "TABLE_AHEAD", (({"PERSISTENT": 1}, "SCHEDULED"), (dict(scheduled, Q_AHEAD=1), "Q_AHEAD"),
                                     (dict(scheduled, Q_REGS=1), "Q_REGS")))
    without, ahead = _without_and_with(hopper, SHORT_CAUSAL_WITHOUT_TABLE_AHEAD, "TABLE_AHEAD")
    assert ahead.asm["ptx"] != without.asm["ptx"]


@unshipped_compile
def test_table_ahead_compiles_with_a_window(hopper):
    """The planned 128-key config compiles with TABLE_AHEAD for sm_90, windowed and not, without spills and in the
    same shared memory, and its PTX differs."""
    config = dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, PERSISTENT=1, SCHEDULED=1, PRODUCER_REGS=32,
                  SPLIT_EMPTY=1)
    for window in (False, True):
        without, ahead = _without_and_with(hopper, config, "TABLE_AHEAD", window)
        assert ahead.asm["ptx"] != without.asm["ptx"]


def test_scheduled_is_checked_and_compiles(hopper):
    """SCHEDULED needs PERSISTENT (host check and the kernel's static_assert); the shipped windowed config that
    uses it (128-key tiles, two buffers, ping-pong) compiles for sm_90 without spills."""
    with pytest.raises(ValueError, match="SCHEDULED"):
        hopper.rung_config(4, 128, {"SCHEDULED": 1})
    usage = hopper.resource_usage(hopper.compile_rung(4, 128, torch.bfloat16, True, config=SCHEDULED_WINDOW,
                                                      window=True))
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0


@unshipped_compile
def test_scheduled_compiles_without_a_window(hopper):
    """The same config compiles for sm_90 without a window (causal), without spills."""
    usage = hopper.resource_usage(hopper.compile_rung(4, 128, torch.bfloat16, True, config=SCHEDULED_WINDOW))
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0


def test_scheduled_launch_passes_its_table(hopper, monkeypatch):
    """gluon_launch of a SCHEDULED config: one program per SM at most, and the last scalar is the table that
    schedule_table makes for the launch (an unpaired causal launch: one tile per item); other configs pass one
    unused int32."""
    monkeypatch.setattr(hopper, "_sm_count", lambda device: 132)
    q = torch.zeros(2, 4, 1000, 64, dtype=torch.bfloat16)
    config = dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, SCHEDULED=1, PRODUCER_REGS=32)
    grid, _, scalars, constexprs, _ = hopper.gluon_launch(q, q, q, torch.empty_like(q), True, 0.125, 4, config)
    assert grid == (8 * 8, 1, 1) and constexprs["SCHEDULED"] is True
    expected = hopper.schedule_table(hopper.item_costs(8, 1000, 1000, 128, 64, True), 8, 64, True)
    assert torch.equal(scalars[-1], expected)
    _, _, scalars, constexprs, _ = hopper.gluon_launch(q, q, q, torch.empty_like(q), True, 0.125, 4, None)
    assert scalars[-1].dtype == torch.int32 and scalars[-1].numel() == 1 and constexprs["SCHEDULED"] is False


def test_programs_per_sm_sizes_the_persistent_grid(hopper, monkeypatch):
    """PROGRAMS_PER_SM: a PERSISTENT launch takes at most that many programs per SM (never more than its units, a
    paired causal launch's pairs of query tiles); without PERSISTENT it is an error that names it."""
    monkeypatch.setattr(hopper, "_sm_count", lambda device: 132)
    q = torch.zeros(2, 64, 1000, 128, dtype=torch.bfloat16)
    config = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, maxnreg=128, PERSISTENT=1)
    grid = lambda causal, **more: hopper.gluon_launch(q, q, q, torch.empty_like(q), causal, 0.125, 3,
                                                      dict(config, **more))[0]
    assert grid(False) == (132, 1, 1) and grid(False, PROGRAMS_PER_SM=2) == (264, 1, 1)
    assert grid(True, PROGRAMS_PER_SM=3) == (396, 1, 1)
    small = torch.zeros(1, 2, 300, 128, dtype=torch.bfloat16)      # 5 query tiles of 64 rows a head: 3 pairs
    launch = hopper.gluon_launch(small, small, small, torch.empty_like(small), True, 0.125, 3,
                                 dict(config, PROGRAMS_PER_SM=2))
    assert launch[0] == (hopper.units(5, 2, True), 1, 1) == (6, 1, 1)
    with pytest.raises(ValueError, match="PROGRAMS_PER_SM"):
        hopper.rung_config(3, 128, dict(BLOCK_M=64, PROGRAMS_PER_SM=2))


# ------------------------------------------------------------------------------------------ OWN_RANGES

def _own_consumer_ops(first, lower, free, stop, n_tiles, total_turns, pingpong):
    """One OWN_RANGES consumer's ops (_attend_own) in the program's tile numbering: the program's tiles before
    its own range waited for (K, V) and freed; its own masked / mask-free / masked ranges as _consumer_ops walks
    them, its first tile taking turn 0; empty turns up to total_turns; then the tiles after its range, as the
    first. first <= lower <= free <= stop <= n_tiles."""
    skip = lambda tiles: [op for t in tiles for op in (("k", t), ("v", t), ("kfree", t), ("free", t))]
    own = _consumer_ops(4, stop - first, free - first, pingpong, lower - first)
    ops = skip(range(first)) + [(kind, t if kind in ("turn", "pass") else t + first) for kind, t in own]
    mine = (stop - first) + (lower > first) + (free > lower) + (stop > free)
    for t in range(mine, total_turns):
        ops += [("turn", t), ("pass", t)] if pingpong else []
    return ops + skip(range(stop, n_tiles))


def _own_early_at(first, lower, free, stop, pingpong, before="v"):
    """Q_EARLY under OWN_RANGES: where in _own_consumer_ops' list the consumer loads the next item's Q -- just
    before the wait for the V of its own range's last P·V (before="v"; "k", before its last S, is the mutant),
    so before its trailing skips -- or None when its own range has no tile (the load then follows the item)."""
    if stop <= first:
        return None
    own = _consumer_ops(4, stop - first, free - first, pingpong, lower - first)
    return 4 * first + max(j for j, (kind, _) in enumerate(own) if kind == before)


def _own_item(hopper, m_start, nq, nk, BN, causal, window_left, pingpong, BM=128, before="v"):
    """(n_tiles, per-consumer ops, turns, per-consumer Q_EARLY load points (_own_early_at, `before`)) of the
    128-row program at m_start under OWN_RANGES."""
    kv_start, _, _, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal, window_left)
    tiles = lambda key: -(-(key - kv_start) // BN)
    owns = [hopper.own_range(m_start, c, nq, nk, BM // 2, BN, causal, window_left, kv_start, kv_end)
            for c in (0, 1)]
    total = max(hopper.turns(*own, BN) for own in owns)
    n_tiles = max(tiles(kv_end), 0)
    own_tiles = [[tiles(key) for key in own] for own in owns]
    ops = [_own_consumer_ops(*own, n_tiles, total, pingpong) for own in own_tiles]
    early = [_own_early_at(*own, pingpong, before) for own in own_tiles]
    return n_tiles, ops, total, early


@pytest.mark.parametrize("causal,window_left", [(False, -1)] + [(True, w) for w in WINDOWS])
@pytest.mark.parametrize("BN", [128, 64])
def test_own_ranges_cover_each_consumers_rows(hopper, causal, window_left, BN):
    """OWN_RANGES: each consumer's own range holds every key its 64 rows see, lies inside the program's range
    and on the tile grid; its mask-free tiles are seen by all its rows. With 64-key tiles under causal
    attention (N_Q = N_KV, whole tiles) the lower consumer's range ends one tile before the program's, and the
    upper one attends mask-free to the tile where the lower one needs the mask."""
    BM = 128
    for nq, nk in _tile_cases(BM, BN):
        visible = _visible(nq, nk, causal, window_left)
        for m_start in range(0, nq, BM):
            kv_start, _, _, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal, window_left)
            owns = []
            for c in (0, 1):
                start, free_start, free_end, end = own = hopper.own_range(m_start, c, nq, nk, BM // 2, BN, causal,
                                                                          window_left, kv_start, kv_end)
                where = (nq, nk, m_start, c, kv_start, kv_end, own)
                mine = visible[m_start + c * BM // 2:m_start + (c + 1) * BM // 2]
                assert kv_start <= start <= free_start <= free_end <= end <= kv_end, where
                assert start % BN == 0 and free_start % BN == 0 and free_end % BN == 0, where
                assert not mine[:, end:].any() and not mine[:, :start].any(), where
                assert mine[:, free_start:free_end].all(), where
                owns.append(own)
            if causal and window_left < 0 and BN == 64 and nq == nk and nq % BM == 0:
                assert owns[0][3] == kv_end - BN and owns[1][2] == kv_end - BN, (nq, m_start, owns)


OWN_CASES = [(2, False), (2, True), (3, True)]


@pytest.mark.parametrize("NUM_BUFFERS,pingpong", OWN_CASES,
                         ids=[f"nb{nb}" + ("-pingpong" if pp else "") for nb, pp in OWN_CASES])
@pytest.mark.parametrize("BLOCK_N", [128, 64])
@pytest.mark.parametrize("split", [False, True], ids=["", "split"])
def test_own_ranges_ring_and_turns(hopper, NUM_BUFFERS, pingpong, BLOCK_N, split):
    """Rung 4 with OWN_RANGES, one program per tile: both consumers' ops (_own_consumer_ops) and the producer's
    over the check's shapes, causal or not, with and without windows, under random interleavings: every wait on
    the phase it means, no buffer refilled before both consumers freed it (a skipped tile included), each
    consumer takes as many turns, no deadlock (_simulate_ring)."""
    import numpy as np
    rng = np.random.default_rng(2)
    BM = 128
    for nq, nk in _tile_cases(BM, BLOCK_N):
        for causal, window_left in ((False, -1), (True, -1), (True, 100), (True, 300), (True, 0)):
            for m_start in range(0, nq, BM):
                n_tiles, ops, _, _ = _own_item(hopper, m_start, nq, nk, BLOCK_N, causal, window_left, pingpong)
                for _ in range(3):
                    _simulate_ring(4, n_tiles, 0, NUM_BUFFERS, hopper.ring_slot, rng, pingpong, hopper.turn_phase,
                                   consumer_ops=ops, split=split)


def _own_program_items(hopper, nq, nk, BN, causal, window_left, pid, programs, before="v"):
    """The OWN_RANGES items of persistent program pid (one query tile every `programs`, longest first), each with
    its consumers' Q_EARLY load points (_own_early_at)."""
    BM = 128
    items = []
    for m in range(-(-nq // BM) - 1 - pid, -1, -programs):
        n_tiles, ops, total, early = _own_item(hopper, m * BM, nq, nk, BN, causal, window_left, True, before=before)
        items.append(dict(n_tiles=n_tiles, ops=ops, turns=total, early=early))
    return items


@pytest.mark.parametrize("NUM_BUFFERS", [2, 3])
@pytest.mark.parametrize("split", [False, True], ids=["", "split"])
def test_own_ranges_persistent_ring_and_turns(hopper, NUM_BUFFERS, split):
    """PERSISTENT rung 4 with OWN_RANGES and PINGPONG: several work items per program (each item's turn count
    the larger of its two consumers'), skipped tiles at either end of an item, under random interleavings
    (_simulate_persistent)."""
    import numpy as np
    rng = np.random.default_rng(3)
    BM, BN, programs = 128, 64, 3
    for nq, nk in _tile_cases(BM, BN)[::2]:
        for causal, window_left in ((True, -1), (True, 100), (False, -1)):
            for pid in range(min(programs, -(-nq // BM))):
                items = _own_program_items(hopper, nq, nk, BN, causal, window_left, pid, programs)
                _simulate_persistent(4, items, NUM_BUFFERS, hopper.ring_slot, rng, True, hopper.turn_phase, split)


@pytest.mark.parametrize("BN", [128, 64])
def test_own_ranges_down_visit_each_own_tile_once(hopper, BN):
    """OWN_RANGES=2 (down_steps, the kernel's _attend_own_down): a consumer's steps take every key tile of its own
    range exactly once, from the diagonal down, each from the ring position the producer loaded it into (position
    p holds tile n_tiles - 1 - p); every tile that needs a mask (from free_end on) and the first step are masked,
    the other steps mask-free tiles every one of its rows sees; the skipped positions are the rest of the
    program's tiles. A walk that took the first tile unmasked, or a producer that loaded in key order, fails."""
    BM = 128
    for causal in (False, True):
        for nq, nk in _tile_cases(BM, BN):
            visible = _visible(nq, nk, causal, -1)
            for m_start in range(0, nq, BM):
                kv_start, _, _, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, causal, -1)
                n_tiles = max(-(-(kv_end - kv_start) // BN), 0)
                for c in (0, 1):
                    start, _, free_end, end = hopper.own_range(m_start, c, nq, nk, BM // 2, BN, causal, -1,
                                                               kv_start, kv_end)
                    lead, steps, trail = hopper.down_steps(kv_start, kv_end, start, free_end, end, BN)
                    where = (causal, nq, nk, m_start, c, (start, free_end, end), lead, steps, trail)
                    own = list(range((start - kv_start) // BN, -(-(end - kv_start) // BN)))
                    assert sorted(t for _, t, _ in steps) == own, where
                    assert [t for _, t, _ in steps] == sorted(own, reverse=True), where
                    assert [p for p, _, _ in steps] == list(range(lead, lead + len(steps))), where
                    assert all(t == n_tiles - 1 - p for p, t, _ in steps), where
                    assert sorted(list(range(lead)) + [p for p, _, _ in steps] + trail) == list(range(n_tiles)), where
                    assert not steps or steps[0][2], where
                    mine = visible[m_start + c * BM // 2:m_start + (c + 1) * BM // 2]
                    for _, t, masked in steps:
                        key = kv_start + t * BN
                        assert masked or key + BN <= free_end, where
                        assert masked or mine[:, key:key + BN].all(), where


def _down_program_items(hopper, nq, nk, BN, causal, pid, programs):
    """PERSISTENT program pid's items under OWN_RANGES=2 (one query tile every `programs`, longest first): per
    consumer its leading skips, one pipeline over its steps (down_steps) and its trailing skips, in ring
    positions; no turns."""
    BM = 128
    skip = lambda tiles: [op for t in tiles for op in (("k", t), ("v", t), ("kfree", t), ("free", t))]
    items = []
    for m in range(-(-nq // BM) - 1 - pid, -1, -programs):
        kv_start, _, _, kv_end = hopper.kv_range(m * BM, nq, nk, BM, BN, causal, -1)
        ops = []
        for c in (0, 1):
            start, _, free_end, end = hopper.own_range(m * BM, c, nq, nk, BM // 2, BN, causal, -1, kv_start, kv_end)
            lead, steps, trail = hopper.down_steps(kv_start, kv_end, start, free_end, end, BN)
            walk = [(kind, t + lead) for kind, t in _consumer_ops(4, len(steps), 0, False)]
            ops.append(skip(range(lead)) + walk + skip(trail))
        items.append(dict(n_tiles=max(-(-(kv_end - kv_start) // BN), 0), ops=ops, turns=0, early=[None, None]))
    return items


@pytest.mark.parametrize("NUM_BUFFERS", [2, 5])
def test_own_ranges_down_persistent_ring(hopper, NUM_BUFFERS):
    """PERSISTENT rung 4 with OWN_RANGES=2: each consumer skips the tiles above its own range first (under causal
    the upper consumer skips the program's last tile), then runs one pipeline, under random interleavings: every
    wait on the phase it means, no buffer refilled before both consumers freed it, no deadlock
    (_simulate_persistent)."""
    import numpy as np
    rng = np.random.default_rng(11)
    BN, programs = 64, 3
    for nq, nk in _tile_cases(128, BN)[::2]:
        for causal in (True, False):
            for pid in range(min(programs, -(-nq // 128))):
                items = _down_program_items(hopper, nq, nk, BN, causal, pid, programs)
                _simulate_persistent(4, items, NUM_BUFFERS, hopper.ring_slot, rng, False, hopper.turn_phase)


def test_own_ranges_down_needs_a_plain_persistent_config(hopper):
    """OWN_RANGES=2 needs PERSISTENT and excludes PINGPONG, SPLIT_EMPTY, Q_EARLY and LATE_EPILOGUE; OWN_RANGES is 0,
    1 or 2 (host checks; the kernel asserts the same)."""
    base = dict(BLOCK_N=64, NUM_BUFFERS=3, PERSISTENT=1, OWN_RANGES=2)
    hopper.rung_config(4, 128, base)
    for extra in ({"PERSISTENT": 0}, {"PINGPONG": 1}, {"SPLIT_EMPTY": 1}, {"Q_EARLY": 1}, {"LATE_EPILOGUE": 1}):
        with pytest.raises(ValueError, match="OWN_RANGES=2"):
            hopper.rung_config(4, 128, dict(base, **extra))
    with pytest.raises(ValueError, match="OWN_RANGES is 0, 1 or 2"):
        hopper.rung_config(4, 128, dict(base, OWN_RANGES=3))


@pytest.mark.parametrize("NUM_BUFFERS", [2, 5])
@pytest.mark.parametrize("split", [False, True], ids=["", "split"])
def test_own_ranges_q_early_persistent_ring(hopper, NUM_BUFFERS, split):
    """PERSISTENT rung 4 with OWN_RANGES and Q_EARLY: each consumer loads the next item's Q before the last P·V of
    its own range (before its trailing skips; after the item when it has no own tile), under random
    interleavings: no Q buffer reloaded while an item reads it, no S completing after its consumer let go of its
    Q, every wait on the phase it means, no deadlock (_simulate_persistent)."""
    import numpy as np
    rng = np.random.default_rng(5)
    BN, programs = 64, 3
    for nq, nk in _tile_cases(128, BN)[::2]:
        for causal, window_left in ((True, -1), (True, 100), (False, -1)):
            for pid in range(min(programs, -(-nq // 128))):
                items = _own_program_items(hopper, nq, nk, BN, causal, window_left, pid, programs)
                _simulate_persistent(4, items, NUM_BUFFERS, hopper.ring_slot, rng, True, hopper.turn_phase, split,
                                     q_early=True)


def test_own_ranges_q_early_simulation_catches_a_load_before_the_last_s(hopper):
    """The OWN_RANGES Q_EARLY model is not vacuous: loading the next Q before a consumer's last S of its own range
    (before="k") overwrites the Q that S still reads."""
    import numpy as np
    items = _own_program_items(hopper, 512, 512, 64, True, -1, 0, 1, before="k")
    with pytest.raises(AssertionError, match="let go of its Q|overwrites"):
        for seed in range(20):
            _simulate_persistent(4, items, 5, hopper.ring_slot, np.random.default_rng(seed), True, hopper.turn_phase,
                                 q_early=True)


def test_own_ranges_is_checked_and_compiles(hopper):
    """OWN_RANGES is rung 4's (host check; the kernel static_asserts it); the shipped config that uses it (N = 512
    causal) compiles for sm_90 without spills. One program per tile and windowed:
    test_own_ranges_compiles_everywhere."""
    with pytest.raises(ValueError, match="OWN_RANGES"):
        hopper.rung_config(3, 128, {"OWN_RANGES": 1})
    usage = hopper.resource_usage(hopper.compile_rung(4, 128, torch.bfloat16, True, config=SHORT_CAUSAL))
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, usage


@unshipped_compile
def test_own_ranges_compiles_everywhere(hopper):
    """OWN_RANGES compiles for sm_90 without spills, one program per tile and persistent, windowed and not."""
    for config in (dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, OWN_RANGES=1),
                   dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, SCHEDULED=1, PRODUCER_REGS=32,
                        OWN_RANGES=1)):
        for window in (False, True):
            usage = hopper.resource_usage(hopper.compile_rung(4, 128, torch.bfloat16, True, config=config,
                                                              window=window))
            assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, (config, window, usage)


# ------------------------------------------------------------------------------------------ HALF_DIAGONAL

@pytest.mark.parametrize("window_left", [-1, 0, 100, 300])
def test_half_diagonal_only_where_the_lower_rows_see_no_key_past_half_the_tile(hopper, window_left):
    """half_fits (the kernel's _half_fits): where it says yes for rung 4's lower consumer (the program's first 64
    rows), none of those rows sees a key in the second half of the last masked 128-key tile, so computing only the
    tile's first 64 keys loses nothing; with N_Q = N_KV on whole tiles it says yes for every query tile."""
    BM, BN, Q_ROWS = 128, 128, 64
    hits = 0
    for nq, nk in _tile_cases(BM, BN) + [(1024, 1024), (512, 640), (640, 512), (1000, 1000), (300, 1000)]:
        diagonal = nk - nq
        for m_start in range(0, nq, BM):
            kv_start, free_start, free_end, kv_end = hopper.kv_range(m_start, nq, nk, BM, BN, True, window_left)
            if kv_end <= free_end:
                continue                                   # no masked diagonal range
            if hopper.half_fits(m_start, Q_ROWS, kv_start, kv_end, nk, diagonal, BN):
                hits += 1
                last = kv_start + (kv_end - 1 - kv_start) // BN * BN
                for row in range(m_start, min(m_start + Q_ROWS, nq)):
                    visible = [key for key in range(last + BN // 2, min(last + BN, nk)) if key <= row + diagonal
                               and (window_left < 0 or key >= row + diagonal - window_left)]
                    assert not visible, (nq, nk, m_start, row, visible)
            elif nq == nk and nq % BM == 0:
                raise AssertionError(f"whole tiles, N_Q = N_KV = {nq}: the diagonal tile at {m_start} not halved")
    assert hits > 10


def test_half_diagonal_is_checked_and_compiles(hopper):
    """HALF_DIAGONAL is rung 4's with 128-key tiles, without OWN_RANGES or Q_REGS (host checks; the kernel
    static_asserts them); the shipped config that uses it (the money shot's) compiles for sm_90 without spills, and
    the lower consumer's half tile shows as m64n64 wgmmas (the 128-key tiles' S is m64n128). One program per tile
    and windowed: test_half_diagonal_compiles_everywhere."""
    for bad in ({"HALF_DIAGONAL": 1, "BLOCK_N": 64}, {"HALF_DIAGONAL": 1, "BLOCK_N": 128, "OWN_RANGES": 1},
                {"HALF_DIAGONAL": 1, "BLOCK_N": 128, "Q_REGS": 1}):
        with pytest.raises(ValueError, match="HALF_DIAGONAL"):
            hopper.rung_config(4, 128, bad)
    with pytest.raises(ValueError, match="HALF_DIAGONAL"):
        hopper.rung_config(1, 128, {"HALF_DIAGONAL": 1, "BLOCK_N": 128})
    _half_diagonal_compiles(hopper, MONEY, window=False)


def _half_diagonal_compiles(hopper, config, window):
    kernel = hopper.compile_rung(4, 128, torch.bfloat16, True, config=config, window=window)
    usage = hopper.resource_usage(kernel)
    assert usage["spill_stores"] == 0 and usage["spill_loads"] == 0, (config, window, usage)
    assert "wgmma.mma_async.sync.aligned.m64n64k16" in kernel.asm["ptx"]


@unshipped_compile
def test_half_diagonal_compiles_everywhere(hopper):
    """HALF_DIAGONAL compiles for sm_90 without spills, with m64n64 wgmmas, one program per tile and persistent,
    causal with and without a window."""
    for config in (dict(BLOCK_N=128, NUM_BUFFERS=2, PINGPONG=1, SPLIT_EMPTY=1, HALF_DIAGONAL=1), MONEY):
        for window in (False, True):
            if (config, window) != (MONEY, False):
                _half_diagonal_compiles(hopper, config, window)