"""FlashAttention forward for Hopper (sm_90) in Gluon: FA3's techniques one rung at a time (chapter 12).

Every rung compiles for sm_90 on a CPU machine (``compile_rung``; PTX with ``wgmma.mma_async`` and
``cp.async.bulk.tensor``). On an H200 every rung and each tile config of ``fa2.gluon.candidates`` that was timed
passed gpu/gluon_check.py's 96 fp64 cases (book/results/gluon_check.csv; rung 4's default config: the 60 it
reached). At (8, 32, 2048, 128) bf16 causal the fastest, rung 4 with ping-pong and a 3-deep ring of 64-key tiles,
ran 0.6115 ms beside chapter 6's 0.6054 and cuDNN's 0.5551 (book/results/gluon_sweep.csv). ``fa2.attention`` runs
it where a shipped table says it was faster (``fa2.gluon.dispatch``).

One program per (128-row query tile, batch·head); q, k, v, o are (B, H, N, D) with a unit last stride, read and
written through 4-D TMA descriptors with (1, 1, rows, D) boxes, so a tile never crosses into the next head:
rows past N arrive as zeros and stores drop them. Keys past N_KV are masked with -inf. GQA: H_q % H_kv == 0.
Softmax in base 2 (scale·log2 e folded into one multiply), fp32 state; LSE = (m + log2 l)·ln 2, fp32.
Causal is bottom-right aligned (query i sees keys j <= i + N_KV - N_Q), and, as in chapter 6's kernel, the
key tiles of a program are split into mask-free tiles then the diagonal (and tail) tiles.

* Rung 1 (``RUNG=1``): Q loaded once by TMA into an NVMMA-swizzled shared tile; K and V tiles double-buffered
  by TMA with one mbarrier per buffer and operand (tile j+1 is in flight while tile j is computed; a buffer is
  refilled as soon as the wgmmas that read it have completed). S = Q·Kᵀ with ``warpgroup_mma`` (async, then
  waited), online softmax in registers, P converted to the wgmma A-operand layout in registers (no shared
  memory round trip), O += P·V with ``warpgroup_mma``.
* Rung 2 (``RUNG=2``): FA3's intra-warpgroup pipelining, one partition: tile j's Q·Kᵀ and tile j-1's P·V are
  issued back to back; the kernel waits only for the Q·Kᵀ and computes tile j's softmax while P·V runs on
  the tensor cores.
* Rung 3 (``RUNG=3``): rung 2's consumer plus warp specialisation (``gl.warp_specialize``): a one-warp TMA
  producer partition fills a ring of K/V buffers (ready barriers), the consumer (default partition) frees each
  buffer with an arrive on its empty barrier.
* Rung 4 (``RUNG=4``): FA3's layout of the consumers: rung 3 with the consumer split into two partitions of
  one warpgroup each (the default partition and a 4-warp worker), each owning 64 of the program's 128 query
  rows (its own Q tile, m, l, O, LSE and O store; wgmma M = 64), beside the one-warp producer (padded to a
  warpgroup). Both consumers walk the same key tiles (the program's key range, each masking its own rows), so
  the ring is rung 3's with empty barriers of count 2 (one arrive per consumer partition). They no longer run in
  lock-step: one's softmax can overlap the other's wgmmas. Registers: producer 24, worker consumer
  ``CONSUMER_REGS`` (240), the default partition what is left of 64 K (240). ``PINGPONG=True`` orders their
  wgmma issues explicitly, as FA3's named barriers do: two mbarriers pass a turn between the consumers, which
  issue their S (and previous P·V) wgmmas alternately.

Options of every rung: ``WINDOW`` (causal only; flash-attn's window_size=(window_left, 0)): a program's key tiles
start at the first its first row sees and run in three loops (masked left edge, mask-free, masked diagonal);
checked on the H200 (gpu/gluon_window.py) and dispatched for windowed calls from the table's window families.
``PERSISTENT`` (rungs 3-4): at most one program per SM, looping over the query tiles head by head, under causal
(no window) in units of a head's k-th longest and k-th shortest tile (equal key-tile counts); checked on the H200
(96/96 and the 12 window cases), faster than the one-tile grid at 6 of the 10 headline shapes and within 1 % at
the rest, a candidate of the table (r4_n64b3_pingpong_persistent); under a window 1.2 % slower
(book/results/gluon_persistent.md). ``SCHEDULED`` (persistent): work items from a table the host plans
(schedule_table; ``SCHEDULED=2`` under causal without a window: the paired order, its last round planned,
paired_schedule_table).
``OWN_RANGES`` (rung 4): each consumer attends only to its own rows' key range; ``OWN_RANGES=2`` (persistent, no
window, no PINGPONG): from the diagonal down, the producer loading each item's tiles last first, so an item is one
pipeline whose peeled first S is the masked tile (checked; level with the table's config, not shipped:
book/results/own_down.md). ``SPLIT_EMPTY`` (rungs 3-4): K
and V have empty barriers of their own, K freed once S = Q·Kᵀ is done and loaded a step ahead of V, so 128-key
tiles run in two buffers (the money shot's config on the H200). ``HALF_DIAGONAL`` (rung 4, 128-key tiles): the
lower consumer computes only the first 64 keys of the diagonal tile where its rows see no more (shipped at the
money shot). ``Q_REGS``: Q in registers as the S wgmma's A
operand, ``Q_AHEAD`` (persistent): two Q buffers, the next item's Q loaded a whole item ahead, ``Q_EARLY``
(persistent; with ``OWN_RANGES`` each consumer's own last S): the next item's Q loaded right after an item's last S,
before its last P·V, ``CHAIN_RANGES``
(rungs 2-4): an item's key ranges as one pipeline, without a drain between the mask-free and the masked tiles, and
``TABLE_AHEAD`` (SCHEDULED): each item's table entry read an item ahead, ``SWAP_ROWS`` (persistent rung 4): the
consumers trade row halves on odd items, and ``ONE_LOOP`` (persistent): an item's key range in one pipeline, its
masked tiles picked at run time (1) or every tile masked (2) (all seven measured and checked, not shipped:
slower, level, or faster by less than the table's 3 %). ``O_DIRECT`` (persistent): O stored from registers to
``o_ptr`` without the staging buffer (checked; 0.64-0.97x the time without it, not shipped). ``O_IN_Q``
(persistent): O staged in the consumer's own Q buffer, the next item's Q loaded once the TMA store has read it, which
leaves the O buffers' shared memory to a deeper K/V ring (checked; slower where items are short, not shipped).
``PROGRAMS_PER_SM`` (persistent, host side): the grid takes up to that many programs per SM -- rung 3 on 64-row
tiles at 128 registers a thread fits two, two consumer warpgroups an SM that run one copy of the code (shipped for
causal D = 128 at N = 512 from B·H = 128 to 512). Chapter 12's appendix on short work items
(book/appendix_short_items.ipynb) measures each.
"""

import math

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

LOG2E = 1.4426950408889634      # exp(x) = exp2(x·log2 e)
LN2 = 0.6931471805599453
RUNGS = (1, 2, 3, 4)
BLOCK_NS = (64, 128)
HEAD_DIMS = (64, 128)
TORCH_TO_GL = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}
SIG_DTYPE = {torch.float16: "fp16", torch.bfloat16: "bf16"}


def default_config(rung, head_dim):
    """Tile sizes and launch options of a rung (untuned: nothing has been measured)."""
    cfg = dict(BLOCK_M=128, BLOCK_N=128, NUM_BUFFERS=2, num_warps=8)
    if rung == 3:
        # 8 consumer warps + the producer's warpgroup (4 warps): registers must fit 64 K per SM at 12 warps
        cfg.update(maxnreg=168, PRODUCER_REGS=24)
    if rung == 4:
        # 2 consumer warpgroups (num_warps: the default one) + the producer's: 12 warps, 168 registers each at
        # launch; Triton's setmaxnreg split gives the default partition 3·168 - CONSUMER_REGS - PRODUCER_REGS
        cfg.update(num_warps=4, maxnreg=168, PRODUCER_REGS=24, CONSUMER_REGS=240, PINGPONG=False)
    return cfg


def consumers(rung):
    """Consumer partitions of a rung, each owning BLOCK_M / consumers(rung) query rows of a program."""
    return 2 if rung == 4 else 1


# ------------------------------------------------------------------------------------------------ layouts

@gluon.constexpr_function
def _wgmma_layout(num_warps, n):
    """The accumulator layout of a (rows, n) wgmma: warps stacked along the rows (one warpgroup per 64 rows
    with 8 warps), instruction m16 × n × k16 (16-bit inputs)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, n, 16])


@gluon.constexpr_function
def _half_layout(layout):
    """_wgmma_layout's layout for half as many columns (HALF_DIAGONAL's score tile of BLOCK_N / 2 keys)."""
    m, n, k = layout.instr_shape
    return gl.NVMMADistributedLayout(version=layout.version, warps_per_cta=layout.warps_per_cta,
                                     instr_shape=[m, n // 2, k])


# ------------------------------------------------------------------------------------------------ pieces

# Row reductions through gl.reduce with our own combine functions: gl.max and gl.sum wrap triton.language's
# jit functions, which become interpreter objects when TRITON_INTERPRET=1 (the CPU test suite) and then cannot
# be compiled; these compile the same way with or without the interpreter.
@gluon.jit
def _max_fn(a, b):
    return gl.maximum(a, b)


@gluon.jit
def _add_fn(a, b):
    return a + b


@gluon.jit
def _row_max(x):
    return gl.reduce(x, 1, _max_fn)


@gluon.jit
def _row_sum(x):
    return gl.reduce(x, 1, _add_fn)


@gluon.jit
def _slot(tile, NUM_BUFFERS: gl.constexpr):
    """(buffer, phase parity) of key tile `tile`: its (tile // NUM_BUFFERS)-th use of buffer tile % NUM_BUFFERS
    (ring_slot below is the same in plain Python, for the CPU tests: keep the two in step)."""
    return tile % NUM_BUFFERS, (tile // NUM_BUFFERS) & 1


@gluon.jit
def _load_tile(desc, smem, bars, off_b, off_kvh, tile, kv_start, kv_end, BLOCK_N: gl.constexpr,
               NUM_BUFFERS: gl.constexpr, base=0):
    """TMA load of key tile `tile`'s K (or V) rows of the program's key range (rows kv_start + tile·BLOCK_N ...;
    tiles are counted from the range's start, 0 without a window) into buffer (base + tile) % NUM_BUFFERS of the
    ring smem (base: the tiles of the program's earlier work items, PERSISTENT), completing that buffer's barrier;
    nothing is issued when the tile starts at or past kv_end."""
    buf = (base + tile) % NUM_BUFFERS
    _load_tile_at(desc, smem, bars, off_b, off_kvh, buf, kv_start + tile * BLOCK_N, kv_end)


@gluon.jit
def _load_tile_at(desc, smem, bars, off_b, off_kvh, buf, row, kv_end):
    """TMA load of the K (or V) rows of one tile from `row` into buffer `buf` of the ring smem, completing that
    buffer's barrier; nothing is issued when row is at or past kv_end."""
    pred = row < kv_end
    mbarrier.expect(bars.index(buf), desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [off_b, off_kvh, row, 0], bars.index(buf), smem.index(buf), pred=pred)


@gluon.jit
def _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, off_b, off_kvh, tile, kv_start, kv_end,
             BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, base=0):
    """TMA loads of key tile `tile`'s K and V (_load_tile), one barrier for K and one for V."""
    _load_tile(k_desc, k_smem, k_bars, off_b, off_kvh, tile, kv_start, kv_end, BLOCK_N, NUM_BUFFERS, base)
    _load_tile(v_desc, v_smem, v_bars, off_b, off_kvh, tile, kv_start, kv_end, BLOCK_N, NUM_BUFFERS, base)


@gluon.constexpr_function
def _split(empty_count, NUM_BUFFERS):
    """SPLIT_EMPTY: the ring has an empty barrier per buffer for K (index buf) and one for V (NUM_BUFFERS + buf)
    when it has 2·NUM_BUFFERS of them (_ring), else one per buffer for both."""
    def value(x):                                        # an int, or a constexpr's (a constexpr's) value
        while hasattr(x, "value"):
            x = x.value
        return x
    return value(empty_count) > value(NUM_BUFFERS)


@gluon.jit
def _free_k(empty_bars, slot_tile, NUM_BUFFERS: gl.constexpr):
    """SPLIT_EMPTY: S = Q·Kᵀ of the tile in ring slot slot_tile has completed: its K buffer is free (the
    producer may load K of tile slot_tile + NUM_BUFFERS while this tile's V is still being read). Nothing
    otherwise (K is freed with V, _release)."""
    if _split(empty_bars.shape[0], NUM_BUFFERS):
        mbarrier.arrive(empty_bars.index(slot_tile % NUM_BUFFERS), count=1)


@gluon.jit
def _free_v(empty_bars, slot_tile, NUM_BUFFERS: gl.constexpr):
    """The tile in ring slot slot_tile has been read whole (its P·V completed, or it was skipped): its buffer, or
    with SPLIT_EMPTY its V, is free for the producer."""
    V_FREE: gl.constexpr = NUM_BUFFERS if _split(empty_bars.shape[0], NUM_BUFFERS) else 0
    mbarrier.arrive(empty_bars.index(V_FREE + slot_tile % NUM_BUFFERS), count=1)


@gluon.jit
def _release(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, tile, kv_start, kv_end,
             BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, PRODUCER: gl.constexpr, base=0):
    """Tile `tile` is consumed (every wgmma that read its buffer has completed): refill the buffer with tile
    `tile + NUM_BUFFERS` ourselves, or tell the producer partition it is free (its buffer: (base + tile) %
    NUM_BUFFERS, base = the tiles of the program's earlier work items, PERSISTENT)."""
    if PRODUCER:
        _free_v(empty_bars, base + tile, NUM_BUFFERS)
    else:
        _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, off_b, off_kvh, tile + NUM_BUFFERS, kv_start,
                 kv_end, BLOCK_N, NUM_BUFFERS)


@gluon.jit
def _softmax_step(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left, MASKED: gl.constexpr,
                  IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, BLOCK_N: gl.constexpr, s_layout: gl.constexpr):
    """Online softmax of one score tile s (fp32, raw q·k) in base 2: (p, alpha, m_new, l_new).

    MASKED=False: every key of the tile is visible to every row (no mask, no -inf guard, one FMA per score).
    MASKED=True: keys >= N_KV and, causal, keys > row + diagonal get -inf, and with a WINDOW (causal only) also
    keys < row + diagonal - window_left; a row that has seen no key yet keeps m = -inf and gets p = 0 (no NaN)."""
    if MASKED:
        offs_n = kv + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        visible = offs_n[None, :] < N_KV
        if IS_CAUSAL:
            visible = visible & (offs_n[None, :] <= offs_m[:, None] + diagonal)
        if WINDOW:
            visible = visible & (offs_n[None, :] >= offs_m[:, None] + diagonal - window_left)
        s = gl.where(visible, s * qk_scale, float("-inf"))
        m_new = gl.maximum(m_i, _row_max(s))
        m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
        p = gl.exp2(s - m_safe[:, None])
    else:
        m_new = gl.maximum(m_i, _row_max(s) * qk_scale)
        m_safe = m_new
        p = gl.exp2(s * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_safe)
    l_new = l_i * alpha + _row_sum(p)
    return p, alpha, m_new, l_new


@gluon.jit
def _softmax_any(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left, MASKED: gl.constexpr,
                 IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, BLOCK_N: gl.constexpr, s_layout: gl.constexpr,
                 mask_from=0):
    """_softmax_step, MASKED True or False; or MASKED=2 (ONE_LOOP): masked where the tile starts at or past key
    mask_from (the first masked key tile of the item), a branch the whole warpgroup takes one way."""
    if MASKED == 2:
        if kv >= mask_from:
            p, alpha, m_new, l_new = _softmax_step(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left,
                                                   True, IS_CAUSAL, WINDOW, BLOCK_N, s_layout)
        else:
            p, alpha, m_new, l_new = _softmax_step(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left,
                                                   False, IS_CAUSAL, WINDOW, BLOCK_N, s_layout)
    else:
        p, alpha, m_new, l_new = _softmax_step(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left,
                                               MASKED, IS_CAUSAL, WINDOW, BLOCK_N, s_layout)
    return p, alpha, m_new, l_new


@gluon.jit
def _rescale(acc, alpha, o_layout: gl.constexpr):
    """acc (rows, D) times alpha per row (alpha comes in the score tile's row layout)."""
    alpha_o = gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))
    return acc * alpha_o[:, None]


@gluon.jit
def _to_operand(p, dtype: gl.constexpr, o_layout: gl.constexpr):
    """P in the input dtype, in the register layout of the P·V wgmma's A operand."""
    return gl.convert_layout(p.to(dtype), gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2))


@gluon.jit
def _kv_tiles(k_smem, v_smem, buf, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr):
    """2-D (BLOCK_N, HEAD_DIM) views of buffer buf of the (NUM_BUFFERS, 1, 1, BLOCK_N, HEAD_DIM) rings."""
    k_tile = k_smem.index(buf).reshape([BLOCK_N, HEAD_DIM])
    v_tile = v_smem.index(buf).reshape([BLOCK_N, HEAD_DIM])
    return k_tile, v_tile


@gluon.jit
def _take_turn(turn_bars, turn, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    """PINGPONG (rung 4): before its `turn`-th wgmma issue, consumer CONSUMER waits until the other consumer has
    issued its wgmmas of the turn before (consumer 0 takes turn 0 at once: see turn_phase). Nothing otherwise."""
    if PINGPONG:
        mbarrier.wait(turn_bars.index(CONSUMER), (turn & 1) ^ (1 - CONSUMER))


@gluon.jit
def _pass_turn(turn_bars, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr):
    """PINGPONG: this consumer's wgmmas of its turn are issued, the other consumer may issue its own."""
    if PINGPONG:
        mbarrier.arrive(turn_bars.index(1 - CONSUMER), count=1)


@gluon.jit
def _score_tile(acc, m_i, l_i, q_tile, k_tile, k_bar, phase, kv, offs_m, N_KV, diagonal, qk_scale, window_left,
                turn_bars, turn, empty_bars, slot_tile, NUM_BUFFERS: gl.constexpr, CONSUMER: gl.constexpr,
                PINGPONG: gl.constexpr,
                MASKED: gl.constexpr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, BLOCK_M: gl.constexpr,
                BLOCK_N: gl.constexpr, dtype: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                mask_from=0, pend=None, flush=0, LATE: gl.constexpr = False):
    """Key tile at row kv (its K in k_tile, loaded when k_bar reaches `phase`): wait for K, S = Q·Kᵀ (waited; its
    issue is turn `turn` under PINGPONG), the softmax step and O rescaled; returns O, P as the A operand of the
    P·V wgmma, m and l. SPLIT_EMPTY: K's buffer (ring slot slot_tile) is freed once S is done. LATE (where `flush`
    is set: the item's first tile): the previous item's epilogue (pend, _flush_out) runs while S is computed."""
    mbarrier.wait(k_bar, phase)
    _take_turn(turn_bars, turn, CONSUMER, PINGPONG)
    s = warpgroup_mma(q_tile, k_tile.permute((1, 0)), gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout),
                      use_acc=False, is_async=True)
    _pass_turn(turn_bars, CONSUMER, PINGPONG)
    if LATE:
        if flush:
            _flush_out(pend, dtype, o_layout)
    s = warpgroup_mma_wait(0, deps=(s, ))
    _free_k(empty_bars, slot_tile, NUM_BUFFERS)
    p, alpha, m_i, l_i = _softmax_any(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left, MASKED,
                                      IS_CAUSAL, WINDOW, BLOCK_N, s_layout, mask_from)
    acc = _rescale(acc, alpha, o_layout)
    return acc, _to_operand(p, dtype, o_layout), m_i, l_i


@gluon.jit
def _finish_tile(acc, p_op, v_tile, v_bar, phase, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                 off_b, off_kvh, tile, kv_start, kv_end, turn_bars, turn, CONSUMER: gl.constexpr,
                 PINGPONG: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUFFERS: gl.constexpr, PRODUCER: gl.constexpr,
                 base=0):
    """O += P·V of key tile `tile` (its V in v_tile, loaded when v_bar reaches `phase`; the issue is turn `turn`
    under PINGPONG), waited; then its buffer is released."""
    mbarrier.wait(v_bar, phase)
    _take_turn(turn_bars, turn, CONSUMER, PINGPONG)
    acc = warpgroup_mma(p_op, v_tile, acc, is_async=True)
    _pass_turn(turn_bars, CONSUMER, PINGPONG)
    acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
    _release(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, tile, kv_start, kv_end,
             BLOCK_N, NUM_BUFFERS, PRODUCER, base)
    return acc


# ------------------------------------------------------------------------------------------------ rung 1

@gluon.jit
def _attend_serial(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                   off_b, off_kvh, offs_m, lo, hi, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                   MASKED: gl.constexpr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PRODUCER: gl.constexpr,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                   NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr):
    """Rung 1: key tiles [lo, hi) one after the other (S, softmax, P·V, each waited)."""
    dtype: gl.constexpr = k_desc.dtype
    for kv in range(lo, hi, BLOCK_N):
        tile = (kv - kv_start) // BLOCK_N                  # counted from the program's first key tile
        buf, phase = _slot(tile, NUM_BUFFERS)
        k_tile, v_tile = _kv_tiles(k_smem, v_smem, buf, BLOCK_N, HEAD_DIM)
        acc, p_op, m_i, l_i = _score_tile(acc, m_i, l_i, q_tile, k_tile, k_bars.index(buf), phase, kv, offs_m,
                                          N_KV, diagonal, qk_scale, window_left, turn_bars, 0, empty_bars, tile,
                                          NUM_BUFFERS, 0, False, MASKED,
                                          IS_CAUSAL, WINDOW, BLOCK_M, BLOCK_N, dtype, s_layout, o_layout)
        acc = _finish_tile(acc, p_op, v_tile, v_bars.index(buf), phase, k_desc, v_desc, k_smem, v_smem, k_bars,
                           v_bars, empty_bars, off_b, off_kvh, tile, kv_start, kv_end, turn_bars, 0, 0, False,
                           BLOCK_N, NUM_BUFFERS, PRODUCER)
    return acc, m_i, l_i


# ------------------------------------------------------------------------------------------------ rungs 2-4

@gluon.jit
def _overlap_step(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                  off_b, off_kvh, offs_m, kv, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, shift,
                  MASKED: gl.constexpr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PRODUCER: gl.constexpr,
                  CONSUMER: gl.constexpr, PINGPONG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                  base, WIDTH: gl.constexpr, mask_from=0):
    """One step of _attend_pipelined for the key tile at row kv (tile j, counted from kv_start): _overlap_tile."""
    return _overlap_tile(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                         turn_bars, off_b, off_kvh, offs_m, kv, (kv - kv_start) // BLOCK_N, kv_start, kv_end, N_KV,
                         diagonal, qk_scale, window_left, shift, MASKED, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER,
                         PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, WIDTH,
                         mask_from)


@gluon.jit
def _overlap_tile(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                  off_b, off_kvh, offs_m, kv, tile, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, shift,
                  MASKED: gl.constexpr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PRODUCER: gl.constexpr,
                  CONSUMER: gl.constexpr, PINGPONG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                  base, WIDTH: gl.constexpr, mask_from=0):
    """The overlapped step for the key tile at row kv that sits in ring position base + tile (its step j; under
    OWN_RANGES=2 the position is not the key order): issue S_j = Q·K_jᵀ (turn j + shift) and O += P_{j-1}·V_{j-1}
    (ring position base + tile - 1), wait for S_j only, free K_j, softmax of S_j while P·V runs, then wait for
    P·V, release step j - 1's buffer and rescale O. Returns (O, P_j as the next P·V's A operand, m, l).
    WIDTH < BLOCK_N (HALF_DIAGONAL): S_j over the tile's first WIDTH keys only (s_layout, m, l and offs_m for that
    width)."""
    dtype: gl.constexpr = k_desc.dtype
    buf, phase = _slot(base + tile, NUM_BUFFERS)
    prev = tile - 1
    pbuf, pphase = _slot(base + prev, NUM_BUFFERS)
    k_tile, _ = _kv_tiles(k_smem, v_smem, buf, BLOCK_N, HEAD_DIM)
    _, v_prev = _kv_tiles(k_smem, v_smem, pbuf, BLOCK_N, HEAD_DIM)
    if WIDTH < BLOCK_N:
        k_tile = k_tile.slice(0, WIDTH)
    mbarrier.wait(k_bars.index(buf), phase)
    _take_turn(turn_bars, tile + shift, CONSUMER, PINGPONG)
    s = warpgroup_mma(q_tile, k_tile.permute((1, 0)), gl.zeros([BLOCK_M, WIDTH], gl.float32, s_layout),
                      use_acc=False, is_async=True)
    mbarrier.wait(v_bars.index(pbuf), pphase)
    acc = warpgroup_mma(p_op, v_prev, acc, is_async=True)
    _pass_turn(turn_bars, CONSUMER, PINGPONG)
    s = warpgroup_mma_wait(1, deps=(s, ))          # S_j done; P_{j-1}·V_{j-1} may still run
    _free_k(empty_bars, base + tile, NUM_BUFFERS)
    p, alpha, m_i, l_i = _softmax_any(s, m_i, l_i, kv, offs_m, N_KV, diagonal, qk_scale, window_left, MASKED,
                                      IS_CAUSAL, WINDOW, WIDTH, s_layout, mask_from)
    acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
    _release(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, prev, kv_start, kv_end,
             BLOCK_N, NUM_BUFFERS, PRODUCER, base)
    acc = _rescale(acc, alpha, o_layout)
    return acc, _to_operand(p, dtype, o_layout), m_i, l_i


@gluon.jit
def _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                      turn_bars, off_b, off_kvh, offs_m, lo, hi, kv_start, kv_end, N_KV, diagonal, qk_scale,
                      window_left, shift, MASKED: gl.constexpr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                      PRODUCER: gl.constexpr, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr,
                      BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                      NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr, base=0,
                      next_q=None, early=0, Q_EARLY: gl.constexpr = False, mask_from=0, pend=None, flush=0,
                      LATE: gl.constexpr = False):
    """Rung 2: key tiles [lo, hi) with FA3's intra-warpgroup overlap. Per tile j: issue S_j = Q·K_jᵀ, issue
    O += P_{j-1}·V_{j-1}, wait for S_j only (wgmma groups retire in order), softmax of S_j while P·V runs,
    then wait for P·V, free buffer j-1 and rescale O. The first tile's S and the last tile's P·V are peeled.
    Tiles are counted from the program's first key tile (kv_start). PINGPONG: each of those issue points is
    one turn: tile j's is turn j + shift, shift being the number of earlier key ranges that had tiles (the
    last P·V of each took a turn of its own: see turn_index), plus the turns of the program's earlier work items
    (PERSISTENT). A tile's ring slot is that of base + tile, base = the tiles of the earlier work items.
    Q_EARLY (PERSISTENT): where `early` is set (this is the item's last range), the next item's Q (next_q, see
    _issue_q) is loaded once the last S is done, before the last P·V. MASKED=2 (ONE_LOOP): the tiles from key
    mask_from on are masked, the others not (_softmax_any). LATE: where `flush` is set, the previous item's
    epilogue (pend) runs under the first tile's S (_score_tile)."""
    dtype: gl.constexpr = k_desc.dtype
    if lo < hi:
        first = (lo - kv_start) // BLOCK_N
        buf, phase = _slot(base + first, NUM_BUFFERS)
        k_tile, _ = _kv_tiles(k_smem, v_smem, buf, BLOCK_N, HEAD_DIM)
        acc, p_op, m_i, l_i = _score_tile(acc, m_i, l_i, q_tile, k_tile, k_bars.index(buf), phase, lo, offs_m,
                                          N_KV, diagonal, qk_scale, window_left, turn_bars, first + shift,
                                          empty_bars, base + first, NUM_BUFFERS, CONSUMER, PINGPONG, MASKED,
                                          IS_CAUSAL, WINDOW, BLOCK_M, BLOCK_N, dtype, s_layout, o_layout, mask_from,
                                          pend, flush, LATE)
        for kv in range(lo + BLOCK_N, hi, BLOCK_N):
            acc, p_op, m_i, l_i = _overlap_step(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, kv, kv_start,
                                                kv_end, N_KV, diagonal, qk_scale, window_left, shift, MASKED,
                                                IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N,
                                                HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, BLOCK_N, mask_from)
        last = (hi - 1 - kv_start) // BLOCK_N
        lbuf, lphase = _slot(base + last, NUM_BUFFERS)
        _, v_last = _kv_tiles(k_smem, v_smem, lbuf, BLOCK_N, HEAD_DIM)
        if Q_EARLY:
            if early:
                _issue_q(next_q)
        acc = _finish_tile(acc, p_op, v_last, v_bars.index(lbuf), lphase, k_desc, v_desc, k_smem, v_smem, k_bars,
                           v_bars, empty_bars, off_b, off_kvh, last, kv_start, kv_end, turn_bars, last + 1 + shift,
                           CONSUMER, PINGPONG, BLOCK_N, NUM_BUFFERS, PRODUCER, base)
    return acc, m_i, l_i


@gluon.jit
def _attend_half_last(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                      turn_bars, off_b, off_kvh, offs_m, lo, hi, kv_start, kv_end, N_KV, diagonal, qk_scale,
                      window_left, shift, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PRODUCER: gl.constexpr,
                      CONSUMER: gl.constexpr, PINGPONG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                      HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr,
                      o_layout: gl.constexpr, base=0, next_q=None, early=0, Q_EARLY: gl.constexpr = False,
                      LOOP_MASKED: gl.constexpr = True, mask_from=0):
    """HALF_DIAGONAL: _attend_pipelined over the masked tiles [lo, hi) when none of this consumer's rows sees a key
    in the second half of the last tile: that tile's S = Q·K[:BLOCK_N/2]ᵀ and P·V[:BLOCK_N/2] are half as wide
    (half its wgmma work). The issue points, turns, waits and frees are _attend_pipelined's, one for one (and so is
    Q_EARLY's load of the next Q). LOOP_MASKED=2 (ONE_LOOP): [lo, hi) is the item's whole key range and its
    whole tiles are masked from key mask_from on (_softmax_any); the half tile always is."""
    HALF: gl.constexpr = BLOCK_N // 2
    h_layout: gl.constexpr = _half_layout(s_layout)
    row_half: gl.constexpr = gl.SliceLayout(1, h_layout)
    row_full: gl.constexpr = gl.SliceLayout(1, s_layout)
    dtype: gl.constexpr = k_desc.dtype
    first = (lo - kv_start) // BLOCK_N
    last = (hi - 1 - kv_start) // BLOCK_N
    kv_last = kv_start + last * BLOCK_N
    lbuf, lphase = _slot(base + last, NUM_BUFFERS)
    k_last, v_last = _kv_tiles(k_smem, v_smem, lbuf, BLOCK_N, HEAD_DIM)
    k_half = k_last.slice(0, HALF)
    v_half = v_last.slice(0, HALF)
    offs_h = gl.convert_layout(offs_m, row_half)
    if first < last:
        # the whole tiles [lo, kv_last) as _attend_pipelined does them, without the last P·V
        buf, phase = _slot(base + first, NUM_BUFFERS)
        k_tile, _ = _kv_tiles(k_smem, v_smem, buf, BLOCK_N, HEAD_DIM)
        acc, p_op, m_i, l_i = _score_tile(acc, m_i, l_i, q_tile, k_tile, k_bars.index(buf), phase, lo, offs_m,
                                          N_KV, diagonal, qk_scale, window_left, turn_bars, first + shift,
                                          empty_bars, base + first, NUM_BUFFERS, CONSUMER, PINGPONG, LOOP_MASKED,
                                          IS_CAUSAL, WINDOW, BLOCK_M, BLOCK_N, dtype, s_layout, o_layout, mask_from)
        for kv in range(lo + BLOCK_N, kv_last, BLOCK_N):
            acc, p_op, m_i, l_i = _overlap_step(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, kv, kv_start,
                                                kv_end, N_KV, diagonal, qk_scale, window_left, shift, LOOP_MASKED,
                                                IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N,
                                                HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, BLOCK_N, mask_from)
        # the half tile's S beside the previous tile's P·V
        acc, p_half, m_h, l_h = _overlap_step(acc, p_op, gl.convert_layout(m_i, row_half),
                                              gl.convert_layout(l_i, row_half), q_tile, k_desc, v_desc, k_smem,
                                              v_smem, k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_h,
                                              kv_last, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                                              shift, True, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M,
                                              BLOCK_N, HEAD_DIM, NUM_BUFFERS, h_layout, o_layout, base, HALF)
    else:
        # one tile: the half tile alone
        acc, p_half, m_h, l_h = _score_tile(acc, gl.convert_layout(m_i, row_half), gl.convert_layout(l_i, row_half),
                                            q_tile, k_half, k_bars.index(lbuf), lphase, kv_last, offs_h, N_KV,
                                            diagonal, qk_scale, window_left, turn_bars, first + shift, empty_bars,
                                            base + first, NUM_BUFFERS, CONSUMER, PINGPONG, True, IS_CAUSAL, WINDOW,
                                            BLOCK_M, HALF, dtype, h_layout, o_layout)
    if Q_EARLY:
        if early:
            _issue_q(next_q)
    acc = _finish_tile(acc, p_half, v_half, v_bars.index(lbuf), lphase, k_desc, v_desc, k_smem, v_smem, k_bars,
                       v_bars, empty_bars, off_b, off_kvh, last, kv_start, kv_end, turn_bars, last + 1 + shift,
                       CONSUMER, PINGPONG, BLOCK_N, NUM_BUFFERS, PRODUCER, base)
    return acc, gl.convert_layout(m_h, row_full), gl.convert_layout(l_h, row_full)


@gluon.jit
def _half_fits(offs_m, kv_start, kv_end, N_KV, diagonal, BLOCK_N: gl.constexpr):
    """HALF_DIAGONAL: does no row of offs_m see a key in the second half of the last tile
    of [kv_start, kv_end)? (Causal: row i sees keys <= i + diagonal, none at or past N_KV.)"""
    last = (kv_end - 1 - kv_start) // BLOCK_N
    # the last key any of these rows sees
    seen = gl.minimum(gl.reduce(offs_m, 0, _max_fn) + diagonal, N_KV - 1)
    return seen < kv_start + last * BLOCK_N + BLOCK_N // 2


# ------------------------------------------------------------------------------------------------ kernel

# ------------------------------------------------------------------------------------------------ chained ranges

@gluon.jit
def _chain_range(acc, p_op, m_i, l_i, pending, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                 turn_bars, off_b, off_kvh, offs_m, lo, hi, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                 turn_base, MASKED: gl.constexpr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                 PRODUCER: gl.constexpr, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr,
                 o_layout: gl.constexpr, base):
    """CHAIN_RANGES: key tiles [lo, hi) of one range, its first S issued beside the P·V of the tile before it when
    an earlier range left one `pending` (P computed, its P·V not issued), peeled as in _attend_pipelined otherwise.
    Leaves the range's last P·V pending. Tile j's issue is turn j + turn_base in every range. Returns (O, P, m, l,
    pending)."""
    dtype: gl.constexpr = k_desc.dtype
    if lo < hi:
        if pending:
            acc, p_op, m_i, l_i = _overlap_step(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, lo, kv_start,
                                                kv_end, N_KV, diagonal, qk_scale, window_left, turn_base, MASKED,
                                                IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N,
                                                HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, BLOCK_N)
        else:
            first = (lo - kv_start) // BLOCK_N
            buf, phase = _slot(base + first, NUM_BUFFERS)
            k_tile, _ = _kv_tiles(k_smem, v_smem, buf, BLOCK_N, HEAD_DIM)
            acc, p_op, m_i, l_i = _score_tile(acc, m_i, l_i, q_tile, k_tile, k_bars.index(buf), phase, lo, offs_m,
                                              N_KV, diagonal, qk_scale, window_left, turn_bars, first + turn_base,
                                              empty_bars, base + first, NUM_BUFFERS, CONSUMER, PINGPONG, MASKED,
                                              IS_CAUSAL, WINDOW, BLOCK_M, BLOCK_N, dtype, s_layout, o_layout)
        for kv in range(lo + BLOCK_N, hi, BLOCK_N):
            acc, p_op, m_i, l_i = _overlap_step(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, kv, kv_start,
                                                kv_end, N_KV, diagonal, qk_scale, window_left, turn_base, MASKED,
                                                IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N,
                                                HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, BLOCK_N)
    return acc, p_op, m_i, l_i, pending | (lo < hi)


@gluon.jit
def _attend_chain(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                  off_b, off_kvh, offs_m, kv_start, free_start, free_end, kv_end, N_KV, diagonal, qk_scale,
                  window_left, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PRODUCER: gl.constexpr,
                  CONSUMER: gl.constexpr, PINGPONG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                  base, turn_base, HALF_DIAGONAL: gl.constexpr):
    """CHAIN_RANGES (rungs 2-4): _attend_all's three key ranges as one pipeline. Where one range ends and the next
    begins, the next range's first S is issued beside the last P·V of the one before (_chain_range) instead of the
    pipeline draining and filling again; only the item's very last P·V is issued alone. Turns: tile j's issue is
    turn j + turn_base, the last P·V turn n_tiles + turn_base (_chain_turns). HALF_DIAGONAL as in _attend_all."""
    dtype: gl.constexpr = k_desc.dtype
    p_op = _to_operand(gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), dtype, o_layout)
    pending = gl.to_tensor(kv_start) < kv_start            # False, as a run-time flag
    if WINDOW:
        acc, p_op, m_i, l_i, pending = _chain_range(acc, p_op, m_i, l_i, pending, q_tile, k_desc, v_desc, k_smem,
                                                    v_smem, k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh,
                                                    offs_m, kv_start, free_start, kv_start, kv_end, N_KV, diagonal,
                                                    qk_scale, window_left, turn_base, True, IS_CAUSAL, WINDOW,
                                                    PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM,
                                                    NUM_BUFFERS, s_layout, o_layout, base)
    acc, p_op, m_i, l_i, pending = _chain_range(acc, p_op, m_i, l_i, pending, q_tile, k_desc, v_desc, k_smem, v_smem,
                                                k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m,
                                                free_start, free_end, kv_start, kv_end, N_KV, diagonal, qk_scale,
                                                window_left, turn_base, False, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER,
                                                PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout,
                                                o_layout, base)
    last = (kv_end - 1 - kv_start) // BLOCK_N
    lbuf, lphase = _slot(base + last, NUM_BUFFERS)
    k_last, v_last = _kv_tiles(k_smem, v_smem, lbuf, BLOCK_N, HEAD_DIM)
    half = False
    if HALF_DIAGONAL and CONSUMER == 0 and IS_CAUSAL:
        half = (kv_end > free_end) & _half_fits(offs_m, kv_start, kv_end, N_KV, diagonal, BLOCK_N)
    if half:
        # the masked tiles but the last whole, then the last one's first half (_attend_half_last's shapes)
        HALF: gl.constexpr = BLOCK_N // 2
        h_layout: gl.constexpr = _half_layout(s_layout)
        row_half: gl.constexpr = gl.SliceLayout(1, h_layout)
        row_full: gl.constexpr = gl.SliceLayout(1, s_layout)
        kv_last = kv_start + last * BLOCK_N
        acc, p_op, m_i, l_i, pending = _chain_range(acc, p_op, m_i, l_i, pending, q_tile, k_desc, v_desc, k_smem,
                                                    v_smem, k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh,
                                                    offs_m, free_end, kv_last, kv_start, kv_end, N_KV, diagonal,
                                                    qk_scale, window_left, turn_base, True, IS_CAUSAL, WINDOW,
                                                    PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM,
                                                    NUM_BUFFERS, s_layout, o_layout, base)
        offs_h = gl.convert_layout(offs_m, row_half)
        if pending:
            acc, p_half, m_h, l_h = _overlap_step(acc, p_op, gl.convert_layout(m_i, row_half),
                                                  gl.convert_layout(l_i, row_half), q_tile, k_desc, v_desc, k_smem,
                                                  v_smem, k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh,
                                                  offs_h, kv_last, kv_start, kv_end, N_KV, diagonal, qk_scale,
                                                  window_left, turn_base, True, IS_CAUSAL, WINDOW, PRODUCER,
                                                  CONSUMER, PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS,
                                                  h_layout, o_layout, base, HALF)
        else:
            acc, p_half, m_h, l_h = _score_tile(acc, gl.convert_layout(m_i, row_half),
                                                gl.convert_layout(l_i, row_half), q_tile, k_last.slice(0, HALF),
                                                k_bars.index(lbuf), lphase, kv_last, offs_h, N_KV, diagonal,
                                                qk_scale, window_left, turn_bars, last + turn_base, empty_bars,
                                                base + last, NUM_BUFFERS, CONSUMER, PINGPONG, True, IS_CAUSAL,
                                                WINDOW, BLOCK_M, HALF, dtype, h_layout, o_layout)
        acc = _finish_tile(acc, p_half, v_last.slice(0, HALF), v_bars.index(lbuf), lphase, k_desc, v_desc, k_smem,
                           v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, last, kv_start, kv_end, turn_bars,
                           last + 1 + turn_base, CONSUMER, PINGPONG, BLOCK_N, NUM_BUFFERS, PRODUCER, base)
        m_i = gl.convert_layout(m_h, row_full)
        l_i = gl.convert_layout(l_h, row_full)
    else:
        acc, p_op, m_i, l_i, pending = _chain_range(acc, p_op, m_i, l_i, pending, q_tile, k_desc, v_desc, k_smem,
                                                    v_smem, k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh,
                                                    offs_m, free_end, kv_end, kv_start, kv_end, N_KV, diagonal,
                                                    qk_scale, window_left, turn_base, True, IS_CAUSAL, WINDOW,
                                                    PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM,
                                                    NUM_BUFFERS, s_layout, o_layout, base)
        if pending:                                          # the item's last P·V, alone
            acc = _finish_tile(acc, p_op, v_last, v_bars.index(lbuf), lphase, k_desc, v_desc, k_smem, v_smem,
                               k_bars, v_bars, empty_bars, off_b, off_kvh, last, kv_start, kv_end, turn_bars,
                               last + 1 + turn_base, CONSUMER, PINGPONG, BLOCK_N, NUM_BUFFERS, PRODUCER, base)
    return acc, m_i, l_i


@gluon.jit
def _chain_turns(kv_start, kv_end, BLOCK_N: gl.constexpr):
    """CHAIN_RANGES: PINGPONG turns of an item: one per tile and one for its last P·V (chain_turns on the host)."""
    n_tiles = gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N)
    return n_tiles + (n_tiles > 0).to(gl.int32)


@gluon.jit
def _attend_all(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                off_b, off_kvh, offs_m, kv_start, free_start, free_end, kv_end, N_KV, diagonal, qk_scale,
                window_left, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PIPELINED: gl.constexpr,
                PRODUCER: gl.constexpr, CONSUMER: gl.constexpr, PINGPONG: gl.constexpr,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr, base=0, turn_base=0,
                HALF_DIAGONAL: gl.constexpr = False, next_q=None, has_next=0, Q_EARLY: gl.constexpr = False,
                CHAIN_RANGES: gl.constexpr = False, SWAP_ROWS: gl.constexpr = False, ONE_LOOP: gl.constexpr = False,
                pend=None, pend_valid=0, LATE: gl.constexpr = False):
    """The masked tiles [kv_start, free_start) at a window's left edge (none without a window), the mask-free
    ones [free_start, free_end), then the masked ones [free_end, kv_end). base, turn_base (PERSISTENT, rungs 2-4):
    the ring tiles and PINGPONG turns of the program's earlier work items. HALF_DIAGONAL (causal, rung 4's lower
    consumer; under SWAP_ROWS either consumer): where none of its rows sees the second half of the last masked
    tile, that tile is half as wide (_attend_half_last). Q_EARLY (PERSISTENT, has_next: the program has a next
    item): the last range with tiles loads the next item's Q (next_q) before its last P·V. CHAIN_RANGES: the
    ranges as one pipeline (_attend_chain). ONE_LOOP (no window): [kv_start, kv_end) in one _attend_pipelined
    whose tiles from free_end on are masked (MASKED=2), so that an item runs one copy of the pipeline's code
    instead of one per range (under HALF_DIAGONAL one _attend_half_last over the whole range); ONE_LOOP=2: every
    tile masked (one softmax in the code, the mask's arithmetic on every tile). LATE (pend_valid: there is a
    previous item): the previous item's epilogue (pend) runs under the first S of the first range with tiles."""
    if PIPELINED and ONE_LOOP and not WINDOW:
        LOOP_MASKED: gl.constexpr = 2 if ONE_LOOP == 1 else True
        if HALF_DIAGONAL and (CONSUMER == 0 or SWAP_ROWS) and IS_CAUSAL:
            if (kv_end > free_end) & _half_fits(offs_m, kv_start, kv_end, N_KV, diagonal, BLOCK_N):
                acc, m_i, l_i = _attend_half_last(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                  v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start,
                                                  kv_end, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                                                  turn_base, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG,
                                                  BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base,
                                                  None, 0, False, LOOP_MASKED, free_end)
            else:
                acc, m_i, l_i = _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                  v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start,
                                                  kv_end, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                                                  turn_base, LOOP_MASKED, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER,
                                                  PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout,
                                                  o_layout, base, None, 0, False, free_end)
        else:
            acc, m_i, l_i = _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                              empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, kv_end,
                                              kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, turn_base,
                                              LOOP_MASKED, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M,
                                              BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, None, 0,
                                              False, free_end)
    elif PIPELINED and CHAIN_RANGES:
        acc, m_i, l_i = _attend_chain(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                                      turn_bars, off_b, off_kvh, offs_m, kv_start, free_start, free_end, kv_end, N_KV,
                                      diagonal, qk_scale, window_left, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG,
                                      BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, turn_base,
                                      HALF_DIAGONAL)
    elif PIPELINED:
        # PINGPONG's turn numbers: + 1 for each earlier range with tiles (kv_range_turn_shifts on the host)
        shift_free = (gl.to_tensor(free_start) > kv_start).to(gl.int32) + turn_base
        shift_masked = shift_free + (gl.to_tensor(free_end) > free_start).to(gl.int32)
        # Q_EARLY: which range is the last with tiles (the masked one whenever it has any)
        early_free = has_next & (kv_end <= free_end)
        early_window = early_free & (free_end <= free_start)
        # LATE: the first range with tiles runs the previous item's epilogue
        flush_window = pend_valid & (gl.to_tensor(free_start) > kv_start)
        flush_free = pend_valid & (gl.to_tensor(free_start) <= kv_start) & (gl.to_tensor(free_end) > free_start)
        flush_masked = pend_valid & (gl.to_tensor(free_start) <= kv_start) & (gl.to_tensor(free_end) <= free_start)
        if WINDOW:
            acc, m_i, l_i = _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                              v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start,
                                              free_start, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                                              turn_base, True, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG,
                                              BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base,
                                              next_q, early_window, Q_EARLY, 0, pend, flush_window, LATE)
        acc, m_i, l_i = _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                          empty_bars, turn_bars, off_b, off_kvh, offs_m, free_start, free_end,
                                          kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, shift_free,
                                          False, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N,
                                          HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, next_q, early_free,
                                          Q_EARLY, 0, pend, flush_free, LATE)
        if HALF_DIAGONAL and (CONSUMER == 0 or SWAP_ROWS) and IS_CAUSAL:
            if (kv_end > free_end) & _half_fits(offs_m, kv_start, kv_end, N_KV, diagonal, BLOCK_N):
                acc, m_i, l_i = _attend_half_last(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                  v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, free_end,
                                                  kv_end, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                                                  shift_masked, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG,
                                                  BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base,
                                                  next_q, has_next, Q_EARLY)
            else:
                acc, m_i, l_i = _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars,
                                                  v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m, free_end,
                                                  kv_end, kv_start, kv_end, N_KV, diagonal, qk_scale, window_left,
                                                  shift_masked, True, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER,
                                                  PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout,
                                                  o_layout, base, next_q, has_next, Q_EARLY, 0, pend, flush_masked,
                                                  LATE)
        else:
            acc, m_i, l_i = _attend_pipelined(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                              empty_bars, turn_bars, off_b, off_kvh, offs_m, free_end, kv_end,
                                              kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, shift_masked,
                                              True, IS_CAUSAL, WINDOW, PRODUCER, CONSUMER, PINGPONG, BLOCK_M,
                                              BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, next_q,
                                              has_next, Q_EARLY, 0, pend, flush_masked, LATE)
    else:
        if WINDOW:
            acc, m_i, l_i = _attend_serial(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                           empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, free_start,
                                           kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, True,
                                           IS_CAUSAL, WINDOW, PRODUCER, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS,
                                           s_layout, o_layout)
        acc, m_i, l_i = _attend_serial(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                       empty_bars, turn_bars, off_b, off_kvh, offs_m, free_start, free_end,
                                       kv_start, kv_end, N_KV, diagonal, qk_scale, window_left, False, IS_CAUSAL,
                                       WINDOW, PRODUCER, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout,
                                       o_layout)
        acc, m_i, l_i = _attend_serial(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                       empty_bars, turn_bars, off_b, off_kvh, offs_m, free_end, kv_end, kv_start,
                                       kv_end, N_KV, diagonal, qk_scale, window_left, True, IS_CAUSAL, WINDOW,
                                       PRODUCER, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout)
    return acc, m_i, l_i


@gluon.jit
def _turns(kv_start, free_start, free_end, kv_end, BLOCK_N: gl.constexpr):
    """PINGPONG turns a consumer takes over the key ranges [kv_start, free_start), [free_start, free_end),
    [free_end, kv_end): one per tile and one more per range with tiles (its last P·V; see _attend_pipelined)."""
    return (gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N) + (free_start > kv_start).to(gl.int32)
            + (free_end > free_start).to(gl.int32) + (kv_end > free_end).to(gl.int32))


@gluon.jit
def _own_range(m_prog, consumer, N_Q, N_KV, window_left, kv_start, kv_end, IS_CAUSAL: gl.constexpr,
               WINDOW: gl.constexpr, Q_ROWS: gl.constexpr, BLOCK_N: gl.constexpr):
    """OWN_RANGES: the key ranges (start, free_start, free_end, end) of consumer `consumer`'s own Q_ROWS rows
    (from row m_prog + consumer·Q_ROWS), inside the program's [kv_start, kv_end) (own_range on the host); a
    consumer whose rows see no key of it gets the empty range at kv_start (and skips every tile after it)."""
    start, free_start, free_end, end = _key_range(m_prog + consumer * Q_ROWS, N_Q, N_KV, window_left, IS_CAUSAL,
                                                  WINDOW, Q_ROWS, BLOCK_N)
    start = gl.maximum(start, kv_start)
    end = gl.minimum(end, kv_end)
    empty = end <= start                     # no key: the range collapses to the program's start
    start = gl.where(empty, kv_start, start)
    end = gl.where(empty, kv_start, end)
    free_start = gl.minimum(gl.maximum(free_start, start), end)
    free_end = gl.minimum(gl.maximum(free_end, free_start), end)
    return start, free_start, free_end, end


@gluon.jit
def _own_work(m_prog, consumer: gl.constexpr, N_Q, N_KV, window_left, kv_start, kv_end, IS_CAUSAL: gl.constexpr,
              WINDOW: gl.constexpr, Q_ROWS: gl.constexpr, BLOCK_N: gl.constexpr):
    """OWN_RANGES: consumer `consumer`'s own ranges (_own_range) and the program's turn count, the larger of the two
    consumers' (_turns): (start, free_start, free_end, end, turns)."""
    start, free_start, free_end, end = _own_range(m_prog, consumer, N_Q, N_KV, window_left, kv_start, kv_end,
                                                  IS_CAUSAL, WINDOW, Q_ROWS, BLOCK_N)
    o_start, o_free_start, o_free_end, o_end = _own_range(m_prog, 1 - consumer, N_Q, N_KV, window_left, kv_start,
                                                          kv_end, IS_CAUSAL, WINDOW, Q_ROWS, BLOCK_N)
    turns = gl.maximum(_turns(start, free_start, free_end, end, BLOCK_N),
                       _turns(o_start, o_free_start, o_free_end, o_end, BLOCK_N))
    return start, free_start, free_end, end, turns


@gluon.jit
def _skip_tile(k_bars, v_bars, empty_bars, slot_tile, NUM_BUFFERS: gl.constexpr):
    """OWN_RANGES: a tile of the program's range that this consumer's rows do not see. Its K and V are waited
    for (so the buffer's earlier use is over for both consumers, and no load is left in flight), then the buffer
    is released, as if the tile had been consumed."""
    buf, phase = _slot(slot_tile, NUM_BUFFERS)
    mbarrier.wait(k_bars.index(buf), phase)
    mbarrier.wait(v_bars.index(buf), phase)
    _free_k(empty_bars, slot_tile, NUM_BUFFERS)
    _free_v(empty_bars, slot_tile, NUM_BUFFERS)


@gluon.jit
def _attend_own(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                off_b, off_kvh, offs_m, kv_start, kv_end, own_start, own_free_start, own_free_end, own_end, turns,
                N_KV, diagonal, qk_scale, window_left, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                CONSUMER: gl.constexpr, PINGPONG: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                HEAD_DIM: gl.constexpr, NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr,
                base=0, turn_base=0, next_q=None, has_next=0, Q_EARLY: gl.constexpr = False, pend=None,
                pend_valid=0, LATE: gl.constexpr = False):
    """OWN_RANGES (rung 4): the producer loads the tiles of the program's range [kv_start, kv_end) -- the union
    of both consumers' rows' keys -- but each consumer attends only to its own rows' range [own_start, own_end),
    masked where its own rows need a mask: under causal the upper consumer skips the last 64-key tile and the
    lower one attends mask-free to the tile on the program's diagonal; under a window the lower consumer skips
    the first. Tiles it skips at either end it waits for and releases (_skip_tile). Every consumer takes `turns`
    PINGPONG turns in all (the larger count of the two consumers'; the one with fewer pads with empty turns
    before its trailing skips, so that the other never waits on a turn that comes after a wait of its own).
    Q_EARLY (PERSISTENT): the next item's Q (next_q) is loaded before the own range's last P·V, so also before
    the trailing skips; a consumer without own tiles leaves it to the caller."""
    n_tiles = gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N)
    first = (own_start - kv_start) // BLOCK_N                 # the program's tiles before this consumer's range
    stop = gl.cdiv(own_end - kv_start, BLOCK_N)
    for tile in range(0, first):
        _skip_tile(k_bars, v_bars, empty_bars, base + tile, NUM_BUFFERS)
    # _attend_all's three loops over the own range: its tiles, counted from own_start, sit `first` tiles into
    # the program's ring, and its first one takes turn turn_base
    acc, m_i, l_i = _attend_all(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars,
                                turn_bars, off_b, off_kvh, offs_m, own_start, own_free_start, own_free_end, own_end,
                                N_KV, diagonal, qk_scale, window_left, IS_CAUSAL, WINDOW, True, True, CONSUMER,
                                PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout, o_layout,
                                base + first, turn_base, False, next_q, has_next, Q_EARLY, False, False, False,
                                pend, pend_valid, LATE)
    for t in range(_turns(own_start, own_free_start, own_free_end, own_end, BLOCK_N), turns):
        _take_turn(turn_bars, turn_base + t, CONSUMER, PINGPONG)
        _pass_turn(turn_bars, CONSUMER, PINGPONG)
    for tile in range(stop, n_tiles):
        _skip_tile(k_bars, v_bars, empty_bars, base + tile, NUM_BUFFERS)
    return acc, m_i, l_i


@gluon.jit
def _attend_own_down(acc, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, turn_bars,
                     off_b, off_kvh, offs_m, kv_start, kv_end, own_start, own_free_end, own_end, N_KV, diagonal,
                     qk_scale, window_left, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, CONSUMER: gl.constexpr,
                     BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr,
                     NUM_BUFFERS: gl.constexpr, s_layout: gl.constexpr, o_layout: gl.constexpr, base=0):
    """OWN_RANGES=2 (no window, no PINGPONG): the consumer's own range [own_start, own_end), its keys from the
    diagonal down, in one pipeline. The producer loads the program's tiles last first (_produce's DOWN), so ring
    position p holds key tile n_tiles - 1 - p. The first S (the last own tile, which holds the diagonal) is
    peeled and masked, the other masked tiles [own_free_end, own_end) follow, then the mask-free ones
    [own_start, own_free_end), and only the last P·V is waited alone: one masked and one mask-free copy of the
    step run per item, where the ascending order runs a pipeline per range (each with its own peeled first S and
    last P·V). Tiles of the program's range that the consumer's rows do not see (the upper consumer's: the
    program's last tile) it waits for and releases (_skip_tile), here at the start."""
    dtype: gl.constexpr = k_desc.dtype
    n_tiles = gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N)
    first = (own_start - kv_start) // BLOCK_N                # own key tiles: [first, stop)
    stop = gl.cdiv(own_end - kv_start, BLOCK_N)
    masked = gl.maximum((own_free_end - kv_start) // BLOCK_N, first)   # tiles from `masked` on need the mask
    lead = n_tiles - stop                                    # ring positions before the own range's first
    for pos in range(0, lead):
        _skip_tile(k_bars, v_bars, empty_bars, base + pos, NUM_BUFFERS)
    if first < stop:
        # step j takes key tile stop - 1 - j from ring position lead + j
        buf, phase = _slot(base + lead, NUM_BUFFERS)
        k_tile, _ = _kv_tiles(k_smem, v_smem, buf, BLOCK_N, HEAD_DIM)
        acc, p_op, m_i, l_i = _score_tile(acc, m_i, l_i, q_tile, k_tile, k_bars.index(buf), phase,
                                          kv_start + (stop - 1) * BLOCK_N, offs_m, N_KV, diagonal, qk_scale,
                                          window_left, turn_bars, 0, empty_bars, base + lead, NUM_BUFFERS,
                                          CONSUMER, False, True, IS_CAUSAL, WINDOW, BLOCK_M, BLOCK_N, dtype,
                                          s_layout, o_layout)
        for j in range(1, stop - masked):
            acc, p_op, m_i, l_i = _overlap_tile(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem,
                                                k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m,
                                                kv_start + (stop - 1 - j) * BLOCK_N, lead + j, kv_start, kv_end,
                                                N_KV, diagonal, qk_scale, window_left, 0, True, IS_CAUSAL,
                                                WINDOW, True, CONSUMER, False, BLOCK_M, BLOCK_N, HEAD_DIM,
                                                NUM_BUFFERS, s_layout, o_layout, base, BLOCK_N)
        for j in range(gl.maximum(stop - masked, 1), stop - first):
            acc, p_op, m_i, l_i = _overlap_tile(acc, p_op, m_i, l_i, q_tile, k_desc, v_desc, k_smem, v_smem,
                                                k_bars, v_bars, empty_bars, turn_bars, off_b, off_kvh, offs_m,
                                                kv_start + (stop - 1 - j) * BLOCK_N, lead + j, kv_start, kv_end,
                                                N_KV, diagonal, qk_scale, window_left, 0, False, IS_CAUSAL,
                                                WINDOW, True, CONSUMER, False, BLOCK_M, BLOCK_N, HEAD_DIM,
                                                NUM_BUFFERS, s_layout, o_layout, base, BLOCK_N)
        last = n_tiles - 1 - first                           # ring position of the own range's lowest tile
        lbuf, lphase = _slot(base + last, NUM_BUFFERS)
        _, v_last = _kv_tiles(k_smem, v_smem, lbuf, BLOCK_N, HEAD_DIM)
        acc = _finish_tile(acc, p_op, v_last, v_bars.index(lbuf), lphase, k_desc, v_desc, k_smem, v_smem, k_bars,
                           v_bars, empty_bars, off_b, off_kvh, last, kv_start, kv_end, turn_bars, 0, CONSUMER,
                           False, BLOCK_N, NUM_BUFFERS, True, base)
    for pos in range(gl.maximum(n_tiles - first, lead), n_tiles):
        _skip_tile(k_bars, v_bars, empty_bars, base + pos, NUM_BUFFERS)
    return acc, m_i, l_i


@gluon.jit
def _q_operand(q_tile, Q_REGS: gl.constexpr, s_layout: gl.constexpr):
    """The A operand of the S = Q·Kᵀ wgmmas: Q's shared tile, or with Q_REGS its rows loaded once into registers
    in the wgmma A-operand layout (Q·Kᵀ then reads only K from shared memory: half the shared-memory traffic of
    its wgmmas with 64-key tiles)."""
    if Q_REGS:
        return q_tile.load(gl.DotOperandLayout(operand_index=0, parent=s_layout, k_width=2))
    else:
        return q_tile


@gluon.jit
def _consumer(args, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, PIPELINED: gl.constexpr, PRODUCER: gl.constexpr,
              NUM_BUFFERS: gl.constexpr, PINGPONG: gl.constexpr, CONSUMER: gl.constexpr, num_warps: gl.constexpr,
              OWN_RANGES: gl.constexpr = False, Q_REGS: gl.constexpr = False,
              HALF_DIAGONAL: gl.constexpr = False, CHAIN_RANGES: gl.constexpr = False):
    """Everything but the K/V loads for consumer CONSUMER of the program (rows m_start + CONSUMER·rows of its Q
    tile ...): wait for its Q, attend to every key tile, O / l and LSE out. `args`: the kernel's tuple of its
    run-time arguments (one tuple: a partition's arguments are one tuple literal, whose constexprs must be
    written in it, not concatenated to it)."""
    (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_bars, k_bars, v_bars, empty_bars, turn_bars,
     off_b, off_h, off_kvh, pid_bh, m_start, kv_start, free_start, free_end, kv_end, N_Q, N_KV, qk_scale,
     window_left) = args
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[2]
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[3]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = _wgmma_layout(num_warps, BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(num_warps, HEAD_DIM)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)

    m_prog = m_start
    m_start = m_start + CONSUMER * BLOCK_M
    offs_m = m_start + gl.arange(0, BLOCK_M, layout=row_layout)
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, row_layout)
    l_i = gl.zeros([BLOCK_M], gl.float32, row_layout)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, o_layout)
    diagonal = N_KV - N_Q

    q_smem = q_smem.index(CONSUMER)
    q_tile = q_smem.reshape([BLOCK_M, HEAD_DIM])
    mbarrier.wait(q_bars.index(CONSUMER), 0)
    q_op = _q_operand(q_tile, Q_REGS, s_layout)
    if OWN_RANGES:
        start, free_start, free_end, end, turns = _own_work(m_prog, CONSUMER, N_Q, N_KV, window_left, kv_start,
                                                            kv_end, IS_CAUSAL, WINDOW, BLOCK_M, BLOCK_N)
        acc, m_i, l_i = _attend_own(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                    empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, kv_end, start,
                                    free_start, free_end, end, turns, N_KV, diagonal, qk_scale, window_left,
                                    IS_CAUSAL, WINDOW, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS,
                                    s_layout, o_layout)
    else:
        acc, m_i, l_i = _attend_all(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                    empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, free_start, free_end,
                                    kv_end, N_KV, diagonal, qk_scale, window_left, IS_CAUSAL, WINDOW, PIPELINED,
                                    PRODUCER, CONSUMER, PINGPONG, BLOCK_M, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout,
                                    o_layout, 0, 0, HALF_DIAGONAL, None, 0, False, CHAIN_RANGES)

    _write_out(acc, m_i, l_i, q_smem, q_tile, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, m_start, N_Q, dtype,
               o_layout)
    tma.store_wait(0)


@gluon.jit
def _normalised(acc, m_i, l_i, lse_ptr, pid_bh, offs_m, N_Q, dtype: gl.constexpr, o_layout: gl.constexpr):
    """O = acc / l in `dtype` (the wgmma accumulator's layout), the LSE stored to lse_ptr (rows >= N_Q masked)."""
    # rows that saw no key (causal, N_Q > N_KV) get o = 0 and lse = -inf
    seen = l_i > 0.0
    safe_l = gl.where(seen, l_i, 1.0)
    lse = gl.where(seen, (m_i + gl.log2(safe_l)) * 0.6931471805599453, float("-inf"))
    gl.store(lse_ptr + pid_bh.to(gl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)
    inv_l = gl.convert_layout(1.0 / safe_l, gl.SliceLayout(1, o_layout))
    return (acc * inv_l[:, None]).to(dtype)


@gluon.jit
def _write_out(acc, m_i, l_i, q_smem, q_tile, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, m_start, N_Q,
               dtype: gl.constexpr, o_layout: gl.constexpr):
    """O = acc / l through the Q tile's shared memory and a TMA store (issued, not waited), LSE to lse_ptr."""
    o = _normalised(acc, m_i, l_i, lse_ptr, pid_bh, offs_m, N_Q, dtype, o_layout)
    # Q's tile is read by no wgmma any more: it becomes O's staging tile for the TMA store (rows >= N_Q dropped)
    gl.thread_barrier()
    q_tile.store(o)
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [off_b, off_h, m_start, 0], q_smem)


@gluon.jit
def _flush_out(pend, dtype: gl.constexpr, o_layout: gl.constexpr):
    """LATE_EPILOGUE: the way out of a work item's O (already divided by l, its LSE stored: _normalised), run
    during the next item's first S = Q·Kᵀ. pend: O in `dtype`, where it goes (off_b, off_h, m_start), its staging
    buffer and O's descriptor. The store before it (an item earlier) has left the buffer once store_wait returns."""
    o, off_b, off_h, m_start, o_buf, o_tile, o_desc = pend
    tma.store_wait(0)
    gl.thread_barrier()                  # every warp of the consumer is past the buffer's last use
    o_tile.store(o)
    fence_async_shared()                 # the staged O visible to the TMA unit
    tma.async_copy_shared_to_global(o_desc, [off_b, off_h, m_start, 0], o_buf)


@gluon.jit
def _store_out(acc, m_i, l_i, o_ptr, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, N_Q, dtype: gl.constexpr,
               o_layout: gl.constexpr):
    """_write_out without the staging: O = acc / l stored from the wgmma accumulator's registers straight to
    o_ptr (O's strides are o_desc's; rows >= N_Q masked), so no shared memory, barrier or fence; LSE as there."""
    o = _normalised(acc, m_i, l_i, lse_ptr, pid_bh, offs_m, N_Q, dtype, o_layout)
    HEAD_DIM: gl.constexpr = o_desc.block_type.shape[3]
    rows = gl.convert_layout(offs_m, gl.SliceLayout(1, o_layout))
    cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
    strides = o_desc.strides                             # (B, H, N, D) strides of O, the last 1
    base = o_ptr + off_b.to(gl.int64) * strides[0] + off_h.to(gl.int64) * strides[1]
    offsets = rows.to(gl.int64)[:, None] * strides[2] + cols[None, :]
    gl.store(base + offsets, o, mask=(rows < N_Q)[:, None])


# ------------------------------------------------------------------------------------------------ persistent

@gluon.jit
def _key_range(m_start, N_Q, N_KV, window_left, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
               BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """(kv_start, free_start, free_end, kv_end) of the query tile at row m_start: [kv_start, free_start) and
    [free_end, kv_end) need a mask, [free_start, free_end) does not (kv_range on the host; keep the two in step)."""
    diagonal = N_KV - N_Q
    kv_end = N_KV
    free_end = (N_KV // BLOCK_N) * BLOCK_N
    if IS_CAUSAL:
        kv_end = gl.maximum(gl.minimum(kv_end, m_start + BLOCK_M + diagonal), 0)
        free_end = gl.minimum(free_end, (gl.maximum(m_start + diagonal + 1, 0) // BLOCK_N) * BLOCK_N)
    kv_start = gl.to_tensor(0)
    free_start = gl.to_tensor(0)
    if WINDOW:   # the first key the tile's first row sees; keys every row sees start after its last row's first
        kv_start = (gl.maximum(m_start + diagonal - window_left, 0) // BLOCK_N) * BLOCK_N
        free_start = gl.cdiv(gl.maximum(m_start + BLOCK_M - 1 + diagonal - window_left, 0), BLOCK_N) * BLOCK_N
        free_start = gl.minimum(gl.maximum(free_start, kv_start), free_end)
    return kv_start, free_start, free_end, kv_end


@gluon.jit
def _units(num_m, BH, PAIRED: gl.constexpr):
    """Units of work of a PERSISTENT launch (units on the host): PAIRED (causal without a window) a unit is two
    query tiles of one head, its k-th longest and k-th shortest, whose key tiles add up to the same count for
    every k; otherwise one query tile (with a window the tiles are of nearly equal length). Units go to the
    programs round-robin, head by head. PAIRED == 2 (SPLIT_TAIL): the last, partial round's units are split into
    their two tiles (_tail_item), unless more than two thirds of the programs take one (_tail_split)."""
    if PAIRED:
        return BH * gl.cdiv(num_m, 2)
    else:
        return BH * num_m


@gluon.jit
def _item_count(pid, nprog, num_m, BH, PAIRED: gl.constexpr, schedule_ptr, SCHEDULED: gl.constexpr):
    """How many query tiles program pid takes: its units pid, pid + nprog, ... (two tiles each when PAIRED;
    PAIRED == 2, the whole rounds' pairs and its tiles of a split last round, _tail_item), or SCHEDULED its row of
    the host's table (schedule_table: offsets[nprog + 1], then every program's items)."""
    if SCHEDULED:
        return gl.load(schedule_ptr + pid + 1) - gl.load(schedule_ptr + pid)
    elif PAIRED == 2:                                   # SPLIT_TAIL: whole rounds of pairs, then _tail_item's
        whole, last = _rounds(num_m, BH, nprog, PAIRED)
        tiles = (pid < 2 * last).to(gl.int32) + (pid > 2 * nprog - 1 - 2 * last).to(gl.int32)
        return 2 * whole + gl.where(_tail_split(last, nprog), tiles, 2 * (pid < last).to(gl.int32))
    else:
        per_unit: gl.constexpr = 2 if PAIRED else 1
        return gl.maximum(gl.cdiv(_units(num_m, BH, PAIRED) - pid, nprog), 0) * per_unit


@gluon.jit
def _rounds(num_m, BH, nprog, PAIRED: gl.constexpr):
    """SPLIT_TAIL: (whole rounds of units, units left for the last round) of a paired launch."""
    units = _units(num_m, BH, PAIRED)
    return units // nprog, units % nprog


@gluon.jit
def _tail_split(last, nprog):
    """SPLIT_TAIL: is the last round split into tiles? Only while at most two thirds of the programs take one of
    its units (last <= 2·nprog / 3): then the programs that take two of its tiles take two shortest ones, never a
    longest one with another (tail_split on the host)."""
    return 3 * last <= 2 * nprog


@gluon.jit
def _tail_item(k, pid, nprog, whole, last):
    """SPLIT_TAIL: (unit, 0 for its longest tile or 1 for its shortest) of program pid's item k >= 2·whole. The
    last round's 2·last tiles are listed longest tiles first, in unit order, then shortest tiles in reverse unit
    order, and dealt out in a snake: tile t to program t, tile nprog + i to program nprog - 1 - i. No program
    takes two longest tiles, and one that takes two tiles takes two shortest ones (tail_item on the host)."""
    first = (k == 2 * whole) & (pid < 2 * last)
    t = gl.where(first, pid, 2 * nprog - 1 - pid)
    longest = t < last
    return gl.where(longest, whole * nprog + t, whole * nprog + 2 * last - 1 - t), (1 - longest.to(gl.int32))


@gluon.jit
def _work_item(k, pid, nprog, num_m, BH, H, GROUP, IS_CAUSAL: gl.constexpr, PAIRED: gl.constexpr,
               BLOCK_M: gl.constexpr, schedule_ptr, SCHEDULED: gl.constexpr, TABLE_AHEAD: gl.constexpr = False,
               u_ahead=0):
    """(off_b, off_h, off_kvh, pid_bh, m_start) of program pid's k-th query tile (work_item on the host). Units
    run head by head, so the units running at one time share a few heads' K and V in L2. PAIRED, unit r of a
    head is its tile num_m - 1 - r (the longest first) then tile r; with an odd num_m the middle unit's second
    tile is a phantom, m_start = num_m·BLOCK_M >= N_Q, which _item_range gives no key tiles. Unpaired under
    causal (a window), a head's tiles run longest first. SCHEDULED: item k of program pid's row of the host's
    table, u = pid_bh·num_m + pid_m (schedule_table); TABLE_AHEAD: that entry, u_ahead, was loaded an item earlier
    (_table_entry)."""
    if SCHEDULED:
        if TABLE_AHEAD:
            u = u_ahead
        else:
            u = gl.load(schedule_ptr + nprog + 1 + gl.load(schedule_ptr + pid) + k)
        per_head = num_m
        pid_m = u % per_head
    elif PAIRED == 2:                                   # SPLIT_TAIL: PAIRED's, the last round tile by tile
        u = pid + (k // 2) * nprog
        second = k % 2
        whole, last = _rounds(num_m, BH, nprog, PAIRED)
        if (k >= 2 * whole) & _tail_split(last, nprog):
            u, second = _tail_item(k, pid, nprog, whole, last)
        per_head = gl.cdiv(num_m, 2)
        r = u % per_head
        longest = num_m - 1 - r
        shortest = r + (r == longest).to(gl.int32) * (num_m - r)
        pid_m = longest + second * (shortest - longest)
    elif PAIRED:
        u = pid + (k // 2) * nprog
        per_head = gl.cdiv(num_m, 2)
        r = u % per_head
        longest = num_m - 1 - r
        shortest = r + (r == longest).to(gl.int32) * (num_m - r)
        pid_m = longest + (k % 2) * (shortest - longest)
    else:
        u = pid + k * nprog
        per_head = num_m
        pid_m = u % per_head
        if IS_CAUSAL:
            pid_m = num_m - 1 - pid_m
    pid_bh = u // per_head
    off_h = pid_bh % H
    return pid_bh // H, off_h, off_h // GROUP, pid_bh, pid_m * BLOCK_M


@gluon.jit
def _table_entry(schedule_ptr, nprog, row, k, n_items):
    """TABLE_AHEAD: the table's unit for the program's item k (row: the program's offset in the table), 0 past
    its last item (never read from the table: its row ends there)."""
    return gl.load(schedule_ptr + nprog + 1 + row + k, mask=k < n_items, other=0)


@gluon.jit
def _item_range(m_start, N_Q, N_KV, window_left, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """_key_range of a PERSISTENT work item; a phantom tile (m_start >= N_Q) gets an empty range."""
    kv_start, free_start, free_end, kv_end = _key_range(m_start, N_Q, N_KV, window_left, IS_CAUSAL, WINDOW,
                                                        BLOCK_M, BLOCK_N)
    real = (m_start < N_Q).to(gl.int32)
    return (kv_start, kv_start + (free_start - kv_start) * real, kv_start + (free_end - kv_start) * real,
            kv_start + (kv_end - kv_start) * real)


@gluon.jit
def _load_q(q_desc, q_smem, q_bars, k, pid, nprog, num_m, BH, H, GROUP, schedule_ptr, CONSUMER: gl.constexpr,
            IS_CAUSAL: gl.constexpr, PAIRED: gl.constexpr, BLOCK_M: gl.constexpr, SCHEDULED: gl.constexpr,
            SLOT: gl.constexpr, TABLE_AHEAD: gl.constexpr = False, u_ahead=0, SWAP_ROWS: gl.constexpr = False):
    """TMA load of consumer CONSUMER's Q rows (_row_half) of program pid's k-th work item into Q buffer (and
    barrier) SLOT (a phantom tile's rows lie past N_Q: TMA fills them with zeros)."""
    Q_ROWS: gl.constexpr = q_desc.block_type.shape[2]
    off_b, off_h, _, _, m_start = _work_item(k, pid, nprog, num_m, BH, H, GROUP, IS_CAUSAL, PAIRED, BLOCK_M,
                                             schedule_ptr, SCHEDULED, TABLE_AHEAD, u_ahead)
    mbarrier.expect(q_bars.index(SLOT), q_desc.block_type.nbytes)
    row = m_start + _row_half(k, CONSUMER, SWAP_ROWS) * Q_ROWS
    tma.async_copy_global_to_shared(q_desc, [off_b, off_h, row, 0], q_bars.index(SLOT), q_smem.index(SLOT))


@gluon.jit
def _row_half(k, CONSUMER: gl.constexpr, SWAP_ROWS: gl.constexpr):
    """Which half of the 128 query rows of work item k consumer CONSUMER takes: its own (0: the first 64 rows), or
    under SWAP_ROWS the other one on odd items. Under causal the first half sees fewer keys (HALF_DIAGONAL: half
    a tile fewer), so swapping evens the two consumers' work over an item pair instead of leaving consumer 0 ahead
    by half a tile per item, which the shared K/V ring lets it keep only a tile or two of."""
    if SWAP_ROWS:
        half = (k & 1) ^ CONSUMER
    else:
        half = CONSUMER
    return half


@gluon.jit
def _next_q(q_desc, q_smem, q_bars, count, n_items, pid, nprog, num_m, BH, H, GROUP, schedule_ptr,
            CONSUMER: gl.constexpr, IS_CAUSAL: gl.constexpr, PAIRED: gl.constexpr, BLOCK_M: gl.constexpr,
            SCHEDULED: gl.constexpr, TABLE_AHEAD: gl.constexpr = False, u_next=0):
    """Q_EARLY: what _issue_q needs to load consumer CONSUMER's Q rows of item count + 1 into its Q buffer,
    worked out when item count starts (under SCHEDULED the table's reads are then long done by the load; under
    TABLE_AHEAD u_next is item count + 1's entry, read as item count started). The last item asks for itself
    again (never loaded: the table has no row past the program's last item)."""
    Q_ROWS: gl.constexpr = q_desc.block_type.shape[2]
    off_b, off_h, _, _, m_start = _work_item(gl.minimum(count + 1, n_items - 1), pid, nprog, num_m, BH, H, GROUP,
                                             IS_CAUSAL, PAIRED, BLOCK_M, schedule_ptr, SCHEDULED, TABLE_AHEAD,
                                             u_next)
    return (q_desc, q_smem.index(CONSUMER), q_bars.index(CONSUMER), off_b, off_h, m_start + CONSUMER * Q_ROWS)


@gluon.jit
def _issue_q(next_q):
    """Q_EARLY: once every warp of the consumer is past its last wgmma that reads Q, the TMA load of the next
    item's Q rows into the same buffer (next_q from _next_q)."""
    q_desc, q_buf, q_bar, off_b, off_h, row = next_q
    gl.thread_barrier()
    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [off_b, off_h, row, 0], q_bar, q_buf)


@gluon.jit
def _load_next_q(q_desc, q_smem, q_bars, count, n_items, pid, nprog, num_m, BH, H, GROUP, schedule_ptr,
                 CONSUMER: gl.constexpr, IS_CAUSAL: gl.constexpr, PAIRED: gl.constexpr, BLOCK_M: gl.constexpr,
                 SCHEDULED: gl.constexpr, TABLE_AHEAD: gl.constexpr = False, u_ahead=0,
                 SWAP_ROWS: gl.constexpr = False):
    """PERSISTENT: once every warp of consumer CONSUMER is done reading its Q buffer, item count + 1's Q into it
    (_load_q), if the program has one."""
    if count + 1 < n_items:
        gl.thread_barrier()
        _load_q(q_desc, q_smem, q_bars, count + 1, pid, nprog, num_m, BH, H, GROUP, schedule_ptr, CONSUMER,
                IS_CAUSAL, PAIRED, BLOCK_M, SCHEDULED, CONSUMER, TABLE_AHEAD, u_ahead, SWAP_ROWS)


@gluon.jit
def _consumer_persistent(args, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                         PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr, CONSUMER: gl.constexpr,
                         SCHEDULED: gl.constexpr, num_warps: gl.constexpr, OWN_RANGES: gl.constexpr = False,
                         Q_REGS: gl.constexpr = False, Q_AHEAD: gl.constexpr = False,
                         HALF_DIAGONAL: gl.constexpr = False, Q_EARLY: gl.constexpr = False,
                         CHAIN_RANGES: gl.constexpr = False, TABLE_AHEAD: gl.constexpr = False,
                         SPLIT_TAIL: gl.constexpr = False, SWAP_ROWS: gl.constexpr = False,
                         ONE_LOOP: gl.constexpr = False, O_DIRECT: gl.constexpr = False,
                         O_IN_Q: gl.constexpr = False, LATE_EPILOGUE: gl.constexpr = False):
    """PERSISTENT (rungs 3-4): consumer CONSUMER over its work items (_work_item, _persistent_item). Its Q rows
    have one shared buffer: the next item's Q is loaded (by this consumer) as soon as the last wgmma that reads
    this item's Q has completed, so the load overlaps this item's epilogue; Q_EARLY: before the item's last P·V
    (the last S is then done), so it also overlaps that P·V and the turn it waits for. Q_AHEAD: two Q buffers,
    item k's in buffer k % 2, and item k + 1's Q loaded when item k starts (the loop takes two items a turn, so
    that each buffer is picked by a constant index). O is staged in a buffer of its own and stored by TMA without
    waiting; the next item waits for that store (store_wait) only before staging its own O (O_DIRECT: no staging,
    O stored from registers; O_IN_Q: O staged in the Q buffer, whose next Q then loads once O has left). The K/V
    ring and PINGPONG's turns run on across items: `base` counts the tiles of earlier items, `turn_base` their
    turns. (Q and O buffers are indexed by constants: a Q buffer picked by a run-time index gave wrong scores on the
    H200 -- gpu/persistent_debug.py.) TABLE_AHEAD (SCHEDULED): each item's table entry is loaded when the item
    before it starts, so neither the item nor the next Q's load waits for a read of the table. SWAP_ROWS (rung 4):
    the two consumers trade query-row halves on odd items (_row_half). ONE_LOOP: an item's key range in one
    pipeline (_attend_all). LATE_EPILOGUE: each item's epilogue runs under the next item's first S = Q·Kᵀ
    (_persistent_item), the last item's after the loop."""
    (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_bars, k_bars, v_bars, empty_bars,
     turn_bars, pid, nprog, num_m, BH, H, GROUP, N_Q, N_KV, qk_scale, window_left, schedule_ptr, o_ptr) = args
    Q_ROWS: gl.constexpr = q_desc.block_type.shape[2]
    BLOCK_M: gl.constexpr = Q_ROWS * CONSUMERS
    PAIRED: gl.constexpr = (IS_CAUSAL and not WINDOW and not SCHEDULED) * (1 + SPLIT_TAIL)     # _units
    n_items = _item_count(pid, nprog, num_m, BH, PAIRED, schedule_ptr, SCHEDULED)
    base = 0
    turn_base = 0
    if Q_AHEAD:
        if n_items > 0:
            _load_q(q_desc, q_smem, q_bars, 0, pid, nprog, num_m, BH, H, GROUP, schedule_ptr, CONSUMER, IS_CAUSAL,
                    PAIRED, BLOCK_M, SCHEDULED, 2 * CONSUMER)
        for count in range(0, n_items, 2):
            base, turn_base, _ = _persistent_item(args, count, n_items, base, turn_base, IS_CAUSAL, WINDOW,
                                                  NUM_BUFFERS, PINGPONG, CONSUMERS, CONSUMER, SCHEDULED, num_warps,
                                                  OWN_RANGES, Q_REGS, Q_AHEAD, 2 * CONSUMER, HALF_DIAGONAL)
            if count + 1 < n_items:
                base, turn_base, _ = _persistent_item(args, count + 1, n_items, base, turn_base, IS_CAUSAL, WINDOW,
                                                      NUM_BUFFERS, PINGPONG, CONSUMERS, CONSUMER, SCHEDULED, num_warps,
                                                      OWN_RANGES, Q_REGS, Q_AHEAD, 2 * CONSUMER + 1, HALF_DIAGONAL)
    else:
        if LATE_EPILOGUE:
            HEAD_DIM: gl.constexpr = q_desc.block_type.shape[3]
            o_layout: gl.constexpr = _wgmma_layout(num_warps, HEAD_DIM)
            o_buf = o_smem.index(CONSUMER)
            o_tile = o_buf.reshape([Q_ROWS, HEAD_DIM])
            # the pending way out: none before the first item (pend_valid = count > 0), these are placeholders
            p_o = gl.zeros([Q_ROWS, HEAD_DIM], q_desc.dtype, o_layout)
            p_off_b = pid * 0
            p_off_h = pid * 0
            p_m_start = pid * 0
        row = 0
        u_next = 0
        if TABLE_AHEAD:
            row = gl.load(schedule_ptr + pid)
            u_next = _table_entry(schedule_ptr, nprog, row, 0, n_items)
        if n_items > 0:
            _load_q(q_desc, q_smem, q_bars, 0, pid, nprog, num_m, BH, H, GROUP, schedule_ptr, CONSUMER, IS_CAUSAL,
                    PAIRED, BLOCK_M, SCHEDULED, CONSUMER, TABLE_AHEAD, u_next)
        for count in range(n_items):
            u_cur = u_next
            if TABLE_AHEAD:                          # the next item's entry, read while this item runs
                u_next = _table_entry(schedule_ptr, nprog, row, count + 1, n_items)
            if LATE_EPILOGUE:
                pend = (p_o, p_off_b, p_off_h, p_m_start, o_buf, o_tile, o_desc)
                base, turn_base, pend = _persistent_item(args, count, n_items, base, turn_base, IS_CAUSAL, WINDOW,
                                                         NUM_BUFFERS, PINGPONG, CONSUMERS, CONSUMER, SCHEDULED,
                                                         num_warps, OWN_RANGES, Q_REGS, Q_AHEAD, CONSUMER,
                                                         HALF_DIAGONAL, Q_EARLY, CHAIN_RANGES, TABLE_AHEAD, u_cur,
                                                         u_next, SPLIT_TAIL, SWAP_ROWS, ONE_LOOP, O_DIRECT, O_IN_Q,
                                                         True, pend)
                p_o, p_off_b, p_off_h, p_m_start = pend[0], pend[1], pend[2], pend[3]
            else:
                base, turn_base, _ = _persistent_item(args, count, n_items, base, turn_base, IS_CAUSAL, WINDOW,
                                                      NUM_BUFFERS, PINGPONG, CONSUMERS, CONSUMER, SCHEDULED,
                                                      num_warps, OWN_RANGES, Q_REGS, Q_AHEAD, CONSUMER,
                                                      HALF_DIAGONAL, Q_EARLY, CHAIN_RANGES, TABLE_AHEAD, u_cur,
                                                      u_next, SPLIT_TAIL, SWAP_ROWS, ONE_LOOP, O_DIRECT, O_IN_Q)
        if LATE_EPILOGUE:
            if n_items > 0:                          # the last item's way out
                _flush_out((p_o, p_off_b, p_off_h, p_m_start, o_buf, o_tile, o_desc), q_desc.dtype, o_layout)
    tma.store_wait(0)


@gluon.jit
def _persistent_item(args, count, n_items, base, turn_base, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr,
                     NUM_BUFFERS: gl.constexpr, PINGPONG: gl.constexpr, CONSUMERS: gl.constexpr,
                     CONSUMER: gl.constexpr, SCHEDULED: gl.constexpr, num_warps: gl.constexpr,
                     OWN_RANGES: gl.constexpr, Q_REGS: gl.constexpr, Q_AHEAD: gl.constexpr, Q_SLOT: gl.constexpr,
                     HALF_DIAGONAL: gl.constexpr = False, Q_EARLY: gl.constexpr = False,
                     CHAIN_RANGES: gl.constexpr = False, TABLE_AHEAD: gl.constexpr = False, u_cur=0, u_next=0,
                     SPLIT_TAIL: gl.constexpr = False, SWAP_ROWS: gl.constexpr = False,
                     ONE_LOOP: gl.constexpr = False, O_DIRECT: gl.constexpr = False,
                     O_IN_Q: gl.constexpr = False, LATE: gl.constexpr = False, pend=0):
    """Consumer CONSUMER's work item `count` of its program, its Q in buffer Q_SLOT (the item's (count // 2)-th
    use of it under Q_AHEAD, its count-th otherwise): returns (base, turn_base) advanced past the item.
    O_DIRECT: O stored from registers (_store_out) instead of staged for a TMA store (_write_out). O_IN_Q: O staged
    in the Q buffer (every wgmma that reads Q is done), and the next item's Q loaded into it once the store has
    read it. LATE (LATE_EPILOGUE): this item's O is divided by l and its LSE stored at its end, but the way out of
    the previous item's O (pend, if count > 0: _flush_out) runs under this item's first S = Q·Kᵀ, and this
    item's is left to the next one: returns (base, turn_base, pend) with this item's
    (without LATE, pend as given)."""
    (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_bars, k_bars, v_bars, empty_bars,
     turn_bars, pid, nprog, num_m, BH, H, GROUP, N_Q, N_KV, qk_scale, window_left, schedule_ptr, o_ptr) = args
    Q_ROWS: gl.constexpr = q_desc.block_type.shape[2]
    BLOCK_M: gl.constexpr = Q_ROWS * CONSUMERS
    HEAD_DIM: gl.constexpr = q_desc.block_type.shape[3]
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = _wgmma_layout(num_warps, BLOCK_N)
    o_layout: gl.constexpr = _wgmma_layout(num_warps, HEAD_DIM)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)
    diagonal = N_KV - N_Q
    q_tile = q_smem.index(Q_SLOT).reshape([Q_ROWS, HEAD_DIM])
    o_buf = o_smem.index(CONSUMER)                   # O_IN_Q: o_smem is q_smem, this consumer's Q buffer
    o_tile = o_buf.reshape([Q_ROWS, HEAD_DIM])
    PAIRED: gl.constexpr = (IS_CAUSAL and not WINDOW and not SCHEDULED) * (1 + SPLIT_TAIL)     # _units

    off_b, off_h, off_kvh, pid_bh, m_prog = _work_item(count, pid, nprog, num_m, BH, H, GROUP, IS_CAUSAL,
                                                       PAIRED, BLOCK_M, schedule_ptr, SCHEDULED, TABLE_AHEAD, u_cur)
    kv_start, free_start, free_end, kv_end = _item_range(m_prog, N_Q, N_KV, window_left, IS_CAUSAL, WINDOW,
                                                         BLOCK_M, BLOCK_N)
    if Q_AHEAD:
        mbarrier.wait(q_bars.index(Q_SLOT), (count // 2) & 1)
        if count + 1 < n_items:                 # the other buffer's item (count - 1) is done: item count + 1's Q
            gl.thread_barrier()
            _load_q(q_desc, q_smem, q_bars, count + 1, pid, nprog, num_m, BH, H, GROUP, schedule_ptr, CONSUMER,
                    IS_CAUSAL, PAIRED, BLOCK_M, SCHEDULED, Q_SLOT ^ 1)
    else:
        mbarrier.wait(q_bars.index(Q_SLOT), count & 1)
    q_op = _q_operand(q_tile, Q_REGS, s_layout)
    if Q_REGS:                                       # Q is in registers: the next item's Q loads meanwhile
        _load_next_q(q_desc, q_smem, q_bars, count, n_items, pid, nprog, num_m, BH, H, GROUP, schedule_ptr,
                     CONSUMER, IS_CAUSAL, PAIRED, BLOCK_M, SCHEDULED)
    m_start = m_prog + _row_half(count, CONSUMER, SWAP_ROWS) * Q_ROWS
    offs_m = m_start + gl.arange(0, Q_ROWS, layout=row_layout)
    m_i = gl.full([Q_ROWS], float("-inf"), gl.float32, row_layout)
    l_i = gl.zeros([Q_ROWS], gl.float32, row_layout)
    acc = gl.zeros([Q_ROWS, HEAD_DIM], gl.float32, o_layout)
    has_next = count + 1 < n_items
    next_q = None
    if Q_EARLY:                 # the next item's Q loads before this item's (OWN_RANGES: own range's) last P·V
        next_q = _next_q(q_desc, q_smem, q_bars, count, n_items, pid, nprog, num_m, BH, H, GROUP, schedule_ptr,
                         CONSUMER, IS_CAUSAL, PAIRED, BLOCK_M, SCHEDULED, TABLE_AHEAD, u_next)
    pend_valid = count > 0                           # LATE: there is a previous item's O to send out
    if (OWN_RANGES == 2) and (not WINDOW):               # keys from the diagonal down (_attend_own_down)
        start, own_free_start, own_free_end, end = _own_range(m_prog, CONSUMER, N_Q, N_KV, window_left, kv_start,
                                                              kv_end, IS_CAUSAL, WINDOW, Q_ROWS, BLOCK_N)
        acc, m_i, l_i = _attend_own_down(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                         empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, kv_end, start,
                                         own_free_end, end, N_KV, diagonal, qk_scale, window_left, IS_CAUSAL,
                                         WINDOW, CONSUMER, Q_ROWS, BLOCK_N, HEAD_DIM, NUM_BUFFERS, s_layout,
                                         o_layout, base)
        item_turns = 0
    elif OWN_RANGES:
        start, own_free_start, own_free_end, end, item_turns = _own_work(
            m_prog, CONSUMER, N_Q, N_KV, window_left, kv_start, kv_end, IS_CAUSAL, WINDOW, Q_ROWS, BLOCK_N)
        acc, m_i, l_i = _attend_own(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                    empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, kv_end, start,
                                    own_free_start, own_free_end, end, item_turns, N_KV, diagonal, qk_scale,
                                    window_left, IS_CAUSAL, WINDOW, CONSUMER, PINGPONG, Q_ROWS, BLOCK_N,
                                    HEAD_DIM, NUM_BUFFERS, s_layout, o_layout, base, turn_base, next_q, has_next,
                                    Q_EARLY, pend, pend_valid, LATE)
        if Q_EARLY:
            if has_next & (end <= start):            # no own key tile: no last P·V to load it at
                _issue_q(next_q)
    elif Q_EARLY:
        item_turns = _turns(kv_start, free_start, free_end, kv_end, BLOCK_N)
        acc, m_i, l_i = _attend_all(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                    empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, free_start,
                                    free_end, kv_end, N_KV, diagonal, qk_scale, window_left, IS_CAUSAL, WINDOW,
                                    True, True, CONSUMER, PINGPONG, Q_ROWS, BLOCK_N, HEAD_DIM, NUM_BUFFERS,
                                    s_layout, o_layout, base, turn_base, HALF_DIAGONAL, next_q, has_next, True,
                                    False, False, False, pend, pend_valid, LATE)
        if has_next & (kv_end <= kv_start):          # an item without key tiles had no last P·V to load it at
            _issue_q(next_q)
    elif CHAIN_RANGES:
        item_turns = _chain_turns(kv_start, kv_end, BLOCK_N)
        acc, m_i, l_i = _attend_all(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                    empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, free_start,
                                    free_end, kv_end, N_KV, diagonal, qk_scale, window_left, IS_CAUSAL, WINDOW,
                                    True, True, CONSUMER, PINGPONG, Q_ROWS, BLOCK_N, HEAD_DIM, NUM_BUFFERS,
                                    s_layout, o_layout, base, turn_base, HALF_DIAGONAL, None, 0, False, True)
    else:
        if ONE_LOOP and not WINDOW:                  # one range: its tiles and its last P·V
            item_turns = _chain_turns(kv_start, kv_end, BLOCK_N)
        else:
            item_turns = _turns(kv_start, free_start, free_end, kv_end, BLOCK_N)
        acc, m_i, l_i = _attend_all(acc, m_i, l_i, q_op, k_desc, v_desc, k_smem, v_smem, k_bars, v_bars,
                                    empty_bars, turn_bars, off_b, off_kvh, offs_m, kv_start, free_start,
                                    free_end, kv_end, N_KV, diagonal, qk_scale, window_left, IS_CAUSAL, WINDOW,
                                    True, True, CONSUMER, PINGPONG, Q_ROWS, BLOCK_N, HEAD_DIM, NUM_BUFFERS,
                                    s_layout, o_layout, base, turn_base, HALF_DIAGONAL, None, 0, False, False,
                                    SWAP_ROWS, ONE_LOOP, pend, pend_valid, LATE)
    if O_IN_Q:                                       # every wgmma reading Q is done: O goes through its buffer,
        _write_out(acc, m_i, l_i, o_buf, o_tile, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, m_start, N_Q,
                   dtype, o_layout)
        tma.store_wait(0)                            # and the next item's Q comes once the store has read it
    if not Q_REGS and not Q_AHEAD and not Q_EARLY:   # every wgmma reading this Q is done: the next item's
        _load_next_q(q_desc, q_smem, q_bars, count, n_items, pid, nprog, num_m, BH, H, GROUP, schedule_ptr,
                     CONSUMER, IS_CAUSAL, PAIRED, BLOCK_M, SCHEDULED, TABLE_AHEAD, u_next, SWAP_ROWS)
    if LATE:
        if OWN_RANGES:
            no_tile = end <= start
        else:
            no_tile = kv_end <= kv_start
        if pend_valid & no_tile:                     # no first S to hide the last item's way out under
            _flush_out(pend, dtype, o_layout)
        o = _normalised(acc, m_i, l_i, lse_ptr, pid_bh, offs_m, N_Q, dtype, o_layout)     # 32 registers, not 64
        pend = (o, off_b, off_h, m_start, o_buf, o_tile, o_desc)
        return base + gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N), turn_base + item_turns, pend
    if O_DIRECT:
        _store_out(acc, m_i, l_i, o_ptr, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, N_Q, dtype, o_layout)
    elif not O_IN_Q:
        tma.store_wait(0)                            # the previous item's O has left o_buf
        _write_out(acc, m_i, l_i, o_buf, o_tile, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, m_start, N_Q,
                   dtype, o_layout)
    return base + gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N), turn_base + item_turns, pend


@gluon.jit
def _producer_persistent(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, pid, nprog, num_m, BH, H,
                         GROUP, N_Q, N_KV, window_left, schedule_ptr, IS_CAUSAL: gl.constexpr,
                         WINDOW: gl.constexpr, BLOCK_M: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                         SCHEDULED: gl.constexpr, TABLE_AHEAD: gl.constexpr = False,
                         SPLIT_TAIL: gl.constexpr = False, DOWN: gl.constexpr = False):
    """PERSISTENT: the producer's loads of every key tile of every work item of the program (_work_item), in the
    consumers' order, into one ring whose tile count runs on across items (so it loads the next item's first
    tiles while the consumers finish the current one). TABLE_AHEAD: each item's table entry read an item ahead.
    DOWN (OWN_RANGES=2 without a window): each item's tiles last first (_produce)."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    PAIRED: gl.constexpr = (IS_CAUSAL and not WINDOW and not SCHEDULED) * (1 + SPLIT_TAIL)     # _units
    base = 0
    n_items = _item_count(pid, nprog, num_m, BH, PAIRED, schedule_ptr, SCHEDULED)
    row = 0
    u_next = 0
    if TABLE_AHEAD:
        row = gl.load(schedule_ptr + pid)
        u_next = _table_entry(schedule_ptr, nprog, row, 0, n_items)
    for k in range(n_items):
        u_cur = u_next
        if TABLE_AHEAD:
            u_next = _table_entry(schedule_ptr, nprog, row, k + 1, n_items)
        off_b, off_h, off_kvh, pid_bh, m_prog = _work_item(k, pid, nprog, num_m, BH, H, GROUP, IS_CAUSAL, PAIRED,
                                                           BLOCK_M, schedule_ptr, SCHEDULED, TABLE_AHEAD, u_cur)
        kv_start, free_start, free_end, kv_end = _item_range(m_prog, N_Q, N_KV, window_left, IS_CAUSAL, WINDOW,
                                                             BLOCK_M, BLOCK_N)
        n_tiles = gl.cdiv(gl.maximum(kv_end - kv_start, 0), BLOCK_N)
        _produce(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, kv_start, kv_end,
                 n_tiles, NUM_BUFFERS, base, DOWN)
        base += n_tiles


@gluon.jit
def _producer(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, kv_start, kv_end,
              NUM_BUFFERS: gl.constexpr):
    """Rungs 3-4's one-warp partition: TMA loads of every key tile of [kv_start, kv_end) into the ring, each
    after its buffer is free (an mbarrier starts in phase 0, so waiting for phase 1 first passes at once)."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    _produce(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, kv_start, kv_end,
             gl.cdiv(kv_end - kv_start, BLOCK_N), NUM_BUFFERS)


@gluon.jit
def _produce(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, kv_start, kv_end, n_tiles,
             NUM_BUFFERS: gl.constexpr, base=0, DOWN: gl.constexpr = False):
    """The producer's loads of key tiles 0 .. n_tiles - 1 of [kv_start, kv_end) (ring slots base + tile), each
    into a buffer the consumers freed. SPLIT_EMPTY: K and V have empty barriers of their own and K of tile t is
    loaded before V of tile t - 1 (consumers read a tile's V one step after its K: S_t is issued beside
    P_{t-1}·V_{t-1}). DOWN (OWN_RANGES=2): the tiles last first, ring slot base + t holding key tile
    n_tiles - 1 - t (_attend_own_down)."""
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    # (the one-tile producer's NUM_BUFFERS comes in a run-time tuple: the ring's depth is read off k_smem)
    if DOWN:
        for tile in range(n_tiles):
            buf, phase = _slot(base + tile, NUM_BUFFERS)
            row = kv_start + (n_tiles - 1 - tile) * BLOCK_N
            mbarrier.wait(empty_bars.index(buf), phase ^ 1)
            _load_tile_at(k_desc, k_smem, k_bars, off_b, off_kvh, buf, row, kv_end)
            _load_tile_at(v_desc, v_smem, v_bars, off_b, off_kvh, buf, row, kv_end)
    elif _split(empty_bars.shape[0], k_smem.shape[0]):
        for tile in range(n_tiles):
            buf, phase = _slot(base + tile, NUM_BUFFERS)
            mbarrier.wait(empty_bars.index(buf), phase ^ 1)
            _load_tile(k_desc, k_smem, k_bars, off_b, off_kvh, tile, kv_start, kv_end, BLOCK_N, NUM_BUFFERS, base)
            if tile > 0:
                pbuf, pphase = _slot(base + tile - 1, NUM_BUFFERS)
                mbarrier.wait(empty_bars.index(NUM_BUFFERS + pbuf), pphase ^ 1)
                _load_tile(v_desc, v_smem, v_bars, off_b, off_kvh, tile - 1, kv_start, kv_end, BLOCK_N,
                           NUM_BUFFERS, base)
        if n_tiles > 0:
            lbuf, lphase = _slot(base + n_tiles - 1, NUM_BUFFERS)
            mbarrier.wait(empty_bars.index(NUM_BUFFERS + lbuf), lphase ^ 1)
            _load_tile(v_desc, v_smem, v_bars, off_b, off_kvh, n_tiles - 1, kv_start, kv_end, BLOCK_N, NUM_BUFFERS,
                       base)
    else:
        for tile in range(n_tiles):
            buf, phase = _slot(base + tile, NUM_BUFFERS)
            mbarrier.wait(empty_bars.index(buf), phase ^ 1)
            _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, off_b, off_kvh, tile, kv_start, kv_end,
                     BLOCK_N, NUM_BUFFERS, base)


@gluon.constexpr_function
def _consumers(rung):
    return 2 if rung == 4 else 1


# The sizes are not specialised (== 1, % 16): one JIT compile per (rung, D, dtype, causal) instead of ~6 over
# gpu/gluon_check.py's shapes (it has 55 s per rung), and the sizes compile as compile_rung's "i32" do.
@gluon.jit(do_not_specialize=["H", "GROUP", "N_Q", "N_KV", "window_left", "BH"])
def _attention_fwd_hopper(q_desc, k_desc, v_desc, o_desc, lse_ptr, H, GROUP, N_Q, N_KV, qk_scale, window_left, BH,
                          schedule_ptr, o_ptr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, RUNG: gl.constexpr,
                          NUM_BUFFERS: gl.constexpr, PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                          PINGPONG: gl.constexpr, PERSISTENT: gl.constexpr, SCHEDULED: gl.constexpr,
                          OWN_RANGES: gl.constexpr, Q_REGS: gl.constexpr, SPLIT_EMPTY: gl.constexpr,
                          Q_AHEAD: gl.constexpr, HALF_DIAGONAL: gl.constexpr, Q_EARLY: gl.constexpr,
                          CHAIN_RANGES: gl.constexpr, TABLE_AHEAD: gl.constexpr, SPLIT_TAIL: gl.constexpr,
                          SWAP_ROWS: gl.constexpr, ONE_LOOP: gl.constexpr, O_DIRECT: gl.constexpr,
                          O_IN_Q: gl.constexpr, LATE_EPILOGUE: gl.constexpr, num_warps: gl.constexpr):
    """Grid (cdiv(N_Q, BLOCK_M), B·H), or PERSISTENT (rungs 3-4) at most one program per SM, each taking its
    units of the cdiv(N_Q, BLOCK_M)·BH query tiles round-robin (_units, _work_item). q_desc/o_desc: 4-D
    (B, H, N_Q, D) descriptors with (1, 1, BLOCK_M / C, D) boxes, C the rung's consumer partitions (consumers());
    k_desc/v_desc: (B, H_kv, N_KV, D) with (1, 1, BLOCK_N, D) boxes; qk_scale = scale·log2 e. o_ptr: O's
    pointer (the tensor under o_desc), written through only by O_DIRECT. WINDOW (causal
    only): query row i sees keys [i + N_KV - N_Q - window_left, i + N_KV - N_Q] (flash-attn's
    window_size=(window_left, 0))."""
    Q_ROWS: gl.constexpr = q_desc.block_type.shape[2]
    gl.static_assert(RUNG >= 1 and RUNG <= 4, "RUNG is 1, 2, 3 or 4")
    gl.static_assert(Q_ROWS == 16 * num_warps or Q_ROWS == 32 * num_warps, "wgmma rows: 16 or 32 per warp")
    # rungs 2-4 wait for tile j's K before freeing tile j-1's buffer: one buffer would deadlock
    gl.static_assert(RUNG == 1 or NUM_BUFFERS >= 2, "rungs 2-4 need NUM_BUFFERS >= 2")
    gl.static_assert(RUNG == 4 or not PINGPONG, "PINGPONG orders rung 4's two consumers")
    gl.static_assert(IS_CAUSAL or not WINDOW, "a window needs the causal mask (its right bound)")
    gl.static_assert(RUNG >= 3 or not PERSISTENT, "PERSISTENT needs the producer partition (rungs 3-4)")
    gl.static_assert(PERSISTENT or not SCHEDULED, "SCHEDULED orders a PERSISTENT launch's work items")
    gl.static_assert(RUNG == 4 or not OWN_RANGES, "OWN_RANGES splits rung 4's key range between its two consumers")
    gl.static_assert(RUNG >= 3 or not SPLIT_EMPTY, "SPLIT_EMPTY frees K and V to the producer partition (rungs 3-4)")
    gl.static_assert(PERSISTENT or not Q_AHEAD, "Q_AHEAD loads a PERSISTENT program's next item's Q")
    gl.static_assert(not (Q_AHEAD and Q_REGS), "Q_AHEAD and Q_REGS are two ways of loading Q early: one at a time")
    gl.static_assert(not Q_EARLY or (PERSISTENT and not Q_REGS and not Q_AHEAD),
                     "Q_EARLY loads a PERSISTENT program's next Q before the last P·V (not with Q_REGS or Q_AHEAD)")
    gl.static_assert(not CHAIN_RANGES or (RUNG >= 2 and not OWN_RANGES and not Q_AHEAD and not Q_EARLY),
                     "CHAIN_RANGES pipelines the key ranges of rungs 2-4 (not with OWN_RANGES, Q_AHEAD or Q_EARLY)")
    gl.static_assert(not TABLE_AHEAD or (SCHEDULED and not Q_AHEAD and not Q_REGS),
                     "TABLE_AHEAD reads a SCHEDULED launch's table an item ahead (not with Q_AHEAD or Q_REGS)")
    gl.static_assert(not HALF_DIAGONAL or (RUNG == 4 and not OWN_RANGES and not Q_REGS),
                     "HALF_DIAGONAL halves rung 4's lower consumer's diagonal tile (not with OWN_RANGES or Q_REGS)")
    gl.static_assert(not SPLIT_TAIL or (PERSISTENT and not SCHEDULED and not Q_AHEAD),
                     "SPLIT_TAIL splits a paired PERSISTENT launch's last round (not with SCHEDULED or Q_AHEAD)")
    gl.static_assert(not SWAP_ROWS or (RUNG == 4 and PERSISTENT and not OWN_RANGES and not Q_REGS and not Q_AHEAD
                                       and not Q_EARLY and not CHAIN_RANGES),
                     "SWAP_ROWS trades rung 4's consumers' row halves between a PERSISTENT program's items (not with "
                     "OWN_RANGES, Q_REGS, Q_AHEAD, Q_EARLY or CHAIN_RANGES)")
    gl.static_assert(not ONE_LOOP or (RUNG >= 2 and PERSISTENT and not OWN_RANGES and not Q_AHEAD and not Q_EARLY
                                      and not CHAIN_RANGES),
                     "ONE_LOOP runs a PERSISTENT item's key range in one pipeline (rungs 2-4; not with OWN_RANGES, "
                     "Q_AHEAD, Q_EARLY or CHAIN_RANGES)")
    gl.static_assert(OWN_RANGES != 2 or (PERSISTENT and not PINGPONG and not SPLIT_EMPTY and not Q_EARLY
                                         and not LATE_EPILOGUE),
                     "OWN_RANGES=2 visits a PERSISTENT program's keys from the diagonal down (not with PINGPONG, "
                     "SPLIT_EMPTY, Q_EARLY or LATE_EPILOGUE)")
    gl.static_assert(PERSISTENT or not O_DIRECT, "O_DIRECT stores a PERSISTENT program's O from registers")
    gl.static_assert(not O_IN_Q or (PERSISTENT and not O_DIRECT and not Q_REGS and not Q_AHEAD and not Q_EARLY),
                     "O_IN_Q stages a PERSISTENT program's O in its Q buffer (not with O_DIRECT, Q_REGS, Q_AHEAD "
                     "or Q_EARLY)")
    gl.static_assert(not LATE_EPILOGUE or (PERSISTENT and not O_DIRECT and not O_IN_Q and not Q_AHEAD
                                            and not HALF_DIAGONAL and not CHAIN_RANGES and not SWAP_ROWS
                                            and not ONE_LOOP),
                     "LATE_EPILOGUE runs a PERSISTENT item's epilogue under the next item's first S (not with "
                     "O_DIRECT, O_IN_Q, Q_AHEAD, HALF_DIAGONAL, CHAIN_RANGES, SWAP_ROWS or ONE_LOOP)")

    if PERSISTENT:
        _persistent(q_desc, k_desc, v_desc, o_desc, lse_ptr, H, GROUP, N_Q, N_KV, qk_scale, window_left, BH,
                    schedule_ptr, IS_CAUSAL, WINDOW, RUNG, NUM_BUFFERS, PRODUCER_REGS, CONSUMER_REGS, PINGPONG,
                    SCHEDULED, OWN_RANGES, Q_REGS, SPLIT_EMPTY, Q_AHEAD, HALF_DIAGONAL, Q_EARLY, CHAIN_RANGES,
                    TABLE_AHEAD, SPLIT_TAIL, SWAP_ROWS, ONE_LOOP, num_warps, o_ptr, O_DIRECT, O_IN_Q,
                    LATE_EPILOGUE)
    else:
        _one_tile(q_desc, k_desc, v_desc, o_desc, lse_ptr, H, GROUP, N_Q, N_KV, qk_scale, window_left,
                  IS_CAUSAL, WINDOW, RUNG, NUM_BUFFERS, PRODUCER_REGS, CONSUMER_REGS, PINGPONG, OWN_RANGES,
                  Q_REGS, SPLIT_EMPTY, HALF_DIAGONAL, CHAIN_RANGES, num_warps)


@gluon.jit
def _ring(k_desc, v_desc, CONSUMERS: gl.constexpr, NUM_BUFFERS: gl.constexpr, PINGPONG: gl.constexpr,
          SPLIT_EMPTY: gl.constexpr = False, Q_SLOTS: gl.constexpr = 1):
    """The K/V ring's shared buffers and every barrier of a program, initialised: (k_smem, v_smem, q_bars, k_bars,
    v_bars, empty_bars, turn_bars). Allocate anything that must come first in shared memory (Q) before. Q_SLOTS:
    Q buffers (and barriers) per consumer (Q_AHEAD: 2)."""
    k_smem = gl.allocate_shared_memory(k_desc.dtype, [NUM_BUFFERS] + k_desc.block_type.shape, k_desc.layout)
    v_smem = gl.allocate_shared_memory(v_desc.dtype, [NUM_BUFFERS] + v_desc.block_type.shape, v_desc.layout)
    q_bars = gl.allocate_shared_memory(gl.int64, [CONSUMERS * Q_SLOTS, 1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [NUM_BUFFERS, 1], mbarrier.MBarrierLayout())
    EMPTY: gl.constexpr = 2 * NUM_BUFFERS if SPLIT_EMPTY else NUM_BUFFERS     # _split
    empty_bars = gl.allocate_shared_memory(gl.int64, [EMPTY, 1], mbarrier.MBarrierLayout())
    turn_bars = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    for c in gl.static_range(CONSUMERS):
        mbarrier.init(q_bars.index(c), count=1)
        if PINGPONG:
            mbarrier.init(turn_bars.index(c), count=1)
    for c in gl.static_range(CONSUMERS, CONSUMERS * Q_SLOTS):    # Q_AHEAD's second Q buffers
        mbarrier.init(q_bars.index(c), count=1)
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)
        mbarrier.init(empty_bars.index(i), count=CONSUMERS)     # one arrive per consumer partition (rungs 3-4)
    for i in gl.static_range(NUM_BUFFERS, EMPTY):                # SPLIT_EMPTY: V's
        mbarrier.init(empty_bars.index(i), count=CONSUMERS)
    fence_async_shared()
    return k_smem, v_smem, q_bars, k_bars, v_bars, empty_bars, turn_bars


@gluon.jit
def _invalidate(q_bars, k_bars, v_bars, empty_bars, turn_bars, CONSUMERS: gl.constexpr, NUM_BUFFERS: gl.constexpr,
                PINGPONG: gl.constexpr):
    """_ring's barriers invalidated, at the end of a program."""
    for c in gl.static_range(CONSUMERS):
        mbarrier.invalidate(q_bars.index(c))
        if PINGPONG:
            mbarrier.invalidate(turn_bars.index(c))
    Q_BARS: gl.constexpr = q_bars.shape[0]
    for c in gl.static_range(CONSUMERS, Q_BARS):                # Q_AHEAD's second Q buffers
        mbarrier.invalidate(q_bars.index(c))
    for i in gl.static_range(NUM_BUFFERS):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))
        mbarrier.invalidate(empty_bars.index(i))
    EMPTY: gl.constexpr = empty_bars.shape[0]
    for i in gl.static_range(NUM_BUFFERS, EMPTY):                # SPLIT_EMPTY: V's
        mbarrier.invalidate(empty_bars.index(i))


@gluon.jit
def _one_tile(q_desc, k_desc, v_desc, o_desc, lse_ptr, H, GROUP, N_Q, N_KV, qk_scale, window_left,
              IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, RUNG: gl.constexpr, NUM_BUFFERS: gl.constexpr,
              PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr, PINGPONG: gl.constexpr,
              OWN_RANGES: gl.constexpr, Q_REGS: gl.constexpr, SPLIT_EMPTY: gl.constexpr,
              HALF_DIAGONAL: gl.constexpr, CHAIN_RANGES: gl.constexpr, num_warps: gl.constexpr):
    """One program per (query tile, batch·head): program ids (query tile, b·H + h)."""
    CONSUMERS: gl.constexpr = _consumers(RUNG)
    Q_ROWS: gl.constexpr = q_desc.block_type.shape[2]
    BLOCK_M: gl.constexpr = Q_ROWS * CONSUMERS
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[2]
    pid_m = gl.program_id(0)
    if IS_CAUSAL:                   # the longest query tiles start first
        pid_m = gl.num_programs(0) - 1 - pid_m
    pid_bh = gl.program_id(1)
    off_b = pid_bh // H
    off_h = pid_bh % H
    off_kvh = off_h // GROUP
    m_start = pid_m * BLOCK_M
    kv_start, free_start, free_end, kv_end = _key_range(m_start, N_Q, N_KV, window_left, IS_CAUSAL, WINDOW, BLOCK_M,
                                                        BLOCK_N)

    q_smem = gl.allocate_shared_memory(q_desc.dtype, [CONSUMERS] + q_desc.block_type.shape, q_desc.layout)
    k_smem, v_smem, q_bars, k_bars, v_bars, empty_bars, turn_bars = _ring(k_desc, v_desc, CONSUMERS, NUM_BUFFERS,
                                                                          PINGPONG, SPLIT_EMPTY)

    for c in gl.static_range(CONSUMERS):
        mbarrier.expect(q_bars.index(c), q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [off_b, off_h, m_start + c * Q_ROWS, 0], q_bars.index(c),
                                        q_smem.index(c))

    # the consumer partitions' run-time arguments (a tuple assigned to a name holds no constexpr)
    consumer = (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, k_smem, v_smem, q_bars, k_bars, v_bars,
                empty_bars, turn_bars, off_b, off_h, off_kvh, pid_bh, m_start, kv_start, free_start, free_end, kv_end,
                N_Q, N_KV, qk_scale, window_left)
    PIPELINED: gl.constexpr = RUNG >= 2
    PRODUCER: gl.constexpr = RUNG >= 3
    producer = (k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, off_b, off_kvh, kv_start, kv_end,
                NUM_BUFFERS)
    if RUNG == 4:
        gl.warp_specialize([
            (_consumer, (consumer, IS_CAUSAL, WINDOW, PIPELINED, PRODUCER, NUM_BUFFERS, PINGPONG, 0, num_warps,
                         OWN_RANGES, Q_REGS, HALF_DIAGONAL, CHAIN_RANGES)),
            (_consumer, (consumer, IS_CAUSAL, WINDOW, PIPELINED, PRODUCER, NUM_BUFFERS, PINGPONG, 1, num_warps,
                         OWN_RANGES, Q_REGS, HALF_DIAGONAL, CHAIN_RANGES)),
            (_producer, producer),
        ], [num_warps, 1], [CONSUMER_REGS, PRODUCER_REGS])
    elif RUNG == 3:
        gl.warp_specialize([
            (_consumer, (consumer, IS_CAUSAL, WINDOW, PIPELINED, PRODUCER, NUM_BUFFERS, PINGPONG, 0, num_warps,
                         False, Q_REGS, False, CHAIN_RANGES)),
            (_producer, producer),
        ], [1], [PRODUCER_REGS])
    else:
        for i in gl.static_range(NUM_BUFFERS):      # the first tiles in flight before any compute
            _load_kv(k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, off_b, off_kvh, i, kv_start, kv_end, BLOCK_N,
                     NUM_BUFFERS)
        _consumer(consumer, IS_CAUSAL, WINDOW, PIPELINED, PRODUCER, NUM_BUFFERS, PINGPONG, 0, num_warps, False,
                  Q_REGS, False, CHAIN_RANGES)

    _invalidate(q_bars, k_bars, v_bars, empty_bars, turn_bars, CONSUMERS, NUM_BUFFERS, PINGPONG)


@gluon.jit
def _persistent(q_desc, k_desc, v_desc, o_desc, lse_ptr, H, GROUP, N_Q, N_KV, qk_scale, window_left, BH,
                schedule_ptr, IS_CAUSAL: gl.constexpr, WINDOW: gl.constexpr, RUNG: gl.constexpr,
                NUM_BUFFERS: gl.constexpr, PRODUCER_REGS: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                PINGPONG: gl.constexpr, SCHEDULED: gl.constexpr, OWN_RANGES: gl.constexpr, Q_REGS: gl.constexpr,
                SPLIT_EMPTY: gl.constexpr, Q_AHEAD: gl.constexpr, HALF_DIAGONAL: gl.constexpr,
                Q_EARLY: gl.constexpr, CHAIN_RANGES: gl.constexpr, TABLE_AHEAD: gl.constexpr,
                SPLIT_TAIL: gl.constexpr, SWAP_ROWS: gl.constexpr, ONE_LOOP: gl.constexpr, num_warps: gl.constexpr,
                o_ptr=None, O_DIRECT: gl.constexpr = False, O_IN_Q: gl.constexpr = False,
                LATE_EPILOGUE: gl.constexpr = False):
    """PERSISTENT: the rung's partitions, each looping over the program's work items (_consumer_persistent,
    _producer_persistent); shared memory and barriers are set up once. O_DIRECT: no O staging buffers (O goes
    from registers to o_ptr), which leaves their shared memory to the K/V ring; O_IN_Q: no O staging buffers either,
    O staged in the consumer's Q buffer once the item's last wgmma has read Q."""
    CONSUMERS: gl.constexpr = _consumers(RUNG)
    BLOCK_M: gl.constexpr = q_desc.block_type.shape[2] * CONSUMERS
    pid = gl.program_id(0)
    nprog = gl.num_programs(0)
    num_m = gl.cdiv(N_Q, BLOCK_M)
    Q_SLOTS: gl.constexpr = 2 if Q_AHEAD else 1
    q_smem = gl.allocate_shared_memory(q_desc.dtype, [CONSUMERS * Q_SLOTS] + q_desc.block_type.shape, q_desc.layout)
    if O_DIRECT or O_IN_Q:
        o_smem = q_smem                                  # O_DIRECT: never written (O leaves from registers)
    else:
        o_smem = gl.allocate_shared_memory(o_desc.dtype, [CONSUMERS] + o_desc.block_type.shape, o_desc.layout)
    k_smem, v_smem, q_bars, k_bars, v_bars, empty_bars, turn_bars = _ring(k_desc, v_desc, CONSUMERS, NUM_BUFFERS,
                                                                          PINGPONG, SPLIT_EMPTY, Q_SLOTS)

    consumer = (q_desc, k_desc, v_desc, o_desc, lse_ptr, q_smem, o_smem, k_smem, v_smem, q_bars, k_bars, v_bars,
                empty_bars, turn_bars, pid, nprog, num_m, BH, H, GROUP, N_Q, N_KV, qk_scale, window_left,
                schedule_ptr, o_ptr)
    # the producer's constexprs are written in its tuple literal (a tuple assigned to a name holds no constexpr)
    if RUNG == 4:
        gl.warp_specialize([
            (_consumer_persistent, (consumer, IS_CAUSAL, WINDOW, NUM_BUFFERS, PINGPONG, CONSUMERS, 0, SCHEDULED,
                                    num_warps, OWN_RANGES, Q_REGS, Q_AHEAD, HALF_DIAGONAL, Q_EARLY, CHAIN_RANGES,
                                    TABLE_AHEAD, SPLIT_TAIL, SWAP_ROWS, ONE_LOOP, O_DIRECT, O_IN_Q, LATE_EPILOGUE)),
            (_consumer_persistent, (consumer, IS_CAUSAL, WINDOW, NUM_BUFFERS, PINGPONG, CONSUMERS, 1, SCHEDULED,
                                    num_warps, OWN_RANGES, Q_REGS, Q_AHEAD, HALF_DIAGONAL, Q_EARLY, CHAIN_RANGES,
                                    TABLE_AHEAD, SPLIT_TAIL, SWAP_ROWS, ONE_LOOP, O_DIRECT, O_IN_Q, LATE_EPILOGUE)),
            (_producer_persistent, (k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, pid, nprog, num_m,
                                    BH, H, GROUP, N_Q, N_KV, window_left, schedule_ptr, IS_CAUSAL, WINDOW, BLOCK_M,
                                    NUM_BUFFERS, SCHEDULED, TABLE_AHEAD, SPLIT_TAIL,
                                    (OWN_RANGES == 2) and (not WINDOW))),
        ], [num_warps, 1], [CONSUMER_REGS, PRODUCER_REGS])
    else:
        gl.warp_specialize([
            (_consumer_persistent, (consumer, IS_CAUSAL, WINDOW, NUM_BUFFERS, PINGPONG, CONSUMERS, 0, SCHEDULED,
                                    num_warps, False, Q_REGS, Q_AHEAD, HALF_DIAGONAL, Q_EARLY, CHAIN_RANGES,
                                    TABLE_AHEAD, SPLIT_TAIL, False, ONE_LOOP, O_DIRECT, O_IN_Q, LATE_EPILOGUE)),
            (_producer_persistent, (k_desc, v_desc, k_smem, v_smem, k_bars, v_bars, empty_bars, pid, nprog, num_m,
                                    BH, H, GROUP, N_Q, N_KV, window_left, schedule_ptr, IS_CAUSAL, WINDOW, BLOCK_M,
                                    NUM_BUFFERS, SCHEDULED, TABLE_AHEAD, SPLIT_TAIL)),
        ], [1], [PRODUCER_REGS])

    _invalidate(q_bars, k_bars, v_bars, empty_bars, turn_bars, CONSUMERS, NUM_BUFFERS, PINGPONG)


# ------------------------------------------------------------------------------------------------ host

def _layout(block_shape, dtype):
    return gl.NVMMASharedLayout.get_default_for(list(block_shape), TORCH_TO_GL[dtype])


def descriptor_signature(block_shape, dtype):
    """The signature type string of a Gluon host TensorDescriptor argument, as the launcher specialises it
    (e.g. ``tensordesc<bf16[1, 1, 128, 64],NVMMASharedLayout(...)>``): what ``compile_rung`` passes to
    ``GluonASTSource`` instead of a real descriptor."""
    shape = ", ".join(str(s) for s in block_shape)
    return f"tensordesc<{SIG_DTYPE[dtype]}[{shape}],{_layout(block_shape, dtype)!r}>"


def kv_range(m_start, N_Q, N_KV, BLOCK_M, BLOCK_N, causal, window_left=-1):
    """(kv_start, free_start, free_end, kv_end) of the query tile at row m_start, in plain Python: the kernel's
    arithmetic (in ``_attention_fwd_hopper``; keep the two in step) for CPU tests. Keys [free_start, free_end)
    need no mask, [kv_start, free_start) (a window's left edge) and [free_end, kv_end) do; every tile of
    [kv_start, kv_end) is loaded and consumed once. Without a window kv_start = free_start = 0."""
    diagonal = N_KV - N_Q
    kv_end = N_KV
    free_end = (N_KV // BLOCK_N) * BLOCK_N
    if causal:
        kv_end = max(min(kv_end, m_start + BLOCK_M + diagonal), 0)
        free_end = min(free_end, (max(m_start + diagonal + 1, 0) // BLOCK_N) * BLOCK_N)
    kv_start = free_start = 0
    if window_left >= 0:
        kv_start = (max(m_start + diagonal - window_left, 0) // BLOCK_N) * BLOCK_N
        free_start = -(-max(m_start + BLOCK_M - 1 + diagonal - window_left, 0) // BLOCK_N) * BLOCK_N
        free_start = min(max(free_start, kv_start), free_end)
    return kv_start, free_start, free_end, kv_end


def half_fits(rows_start, Q_ROWS, kv_start, kv_end, N_KV, diagonal, BLOCK_N):
    """HALF_DIAGONAL: the kernel's ``_half_fits`` in plain Python (keep the two in step): does no row of
    [rows_start, rows_start + Q_ROWS) see a key in the second half of the last tile of [kv_start, kv_end), under
    the causal mask (row i sees keys <= i + diagonal, none at or past N_KV)?"""
    last = (kv_end - 1 - kv_start) // BLOCK_N
    seen = min(rows_start + Q_ROWS - 1 + diagonal, N_KV - 1)
    return seen < kv_start + last * BLOCK_N + BLOCK_N // 2


def own_range(m_prog, consumer, N_Q, N_KV, Q_ROWS, BLOCK_N, causal, window_left, kv_start, kv_end):
    """OWN_RANGES: consumer `consumer`'s own key ranges (start, free_start, free_end, end) inside the program's
    [kv_start, kv_end), in plain Python: the kernel's ``_own_range`` (keep the two in step)."""
    start, free_start, free_end, end = kv_range(m_prog + consumer * Q_ROWS, N_Q, N_KV, Q_ROWS, BLOCK_N, causal,
                                                window_left)
    start, end = max(start, kv_start), min(end, kv_end)
    if end <= start:                         # no key: the range collapses to the program's start
        start = end = kv_start
    free_start = min(max(free_start, start), end)
    free_end = min(max(free_end, free_start), end)
    return start, free_start, free_end, end


def down_steps(kv_start, kv_end, own_start, own_free_end, own_end, BLOCK_N):
    """OWN_RANGES=2: (lead, steps, trail) of one consumer's item in plain Python, as the kernel's
    ``_attend_own_down`` walks it (keep the two in step): ring positions [0, lead) and `trail` skipped; steps
    [(ring position, key tile, masked)] in order, ring position p holding key tile n_tiles - 1 - p (_produce's
    DOWN). Positions and tiles count from the item's first key tile."""
    n_tiles = max(-(-(kv_end - kv_start) // BLOCK_N), 0)
    first = (own_start - kv_start) // BLOCK_N
    stop = -(-(own_end - kv_start) // BLOCK_N)
    masked = max((own_free_end - kv_start) // BLOCK_N, first)
    lead = n_tiles - stop
    steps = []
    if first < stop:
        steps.append((lead, stop - 1, True))
        steps += [(lead + j, stop - 1 - j, True) for j in range(1, stop - masked)]
        steps += [(lead + j, stop - 1 - j, False) for j in range(max(stop - masked, 1), stop - first)]
    return lead, steps, list(range(max(n_tiles - first, lead), n_tiles))


def turns(kv_start, free_start, free_end, kv_end, BLOCK_N):
    """The kernel's ``_turns`` in plain Python: PINGPONG turns over the three key ranges."""
    return (max(-(-(kv_end - kv_start) // BLOCK_N), 0) + (free_start > kv_start) + (free_end > free_start)
            + (kv_end > free_end))


def chain_turns(kv_start, kv_end, BLOCK_N):
    """The kernel's ``_chain_turns`` in plain Python: CHAIN_RANGES's PINGPONG turns of an item."""
    n_tiles = max(-(-(kv_end - kv_start) // BLOCK_N), 0)
    return n_tiles + (n_tiles > 0)


def ring_slot(tile, NUM_BUFFERS):
    """(buffer, phase parity) of key tile `tile` in a ring of NUM_BUFFERS: the kernel's ``_slot`` in plain
    Python (keep the two in step), for the CPU tests."""
    return tile % NUM_BUFFERS, (tile // NUM_BUFFERS) & 1


def turn_phase(turn, consumer):
    """The phase parity consumer `consumer` (0 or 1) of rung 4 waits for on its turn barrier before its
    `turn`-th wgmma issue under PINGPONG: the kernel's ``_take_turn`` in plain Python (keep the two in step).
    Consumer 0's turn 0 waits for parity 1, which passes at once on a fresh barrier."""
    return (turn & 1) ^ (1 - consumer)


def _check_rung(rung, head_dim, dtype):
    if rung not in RUNGS:
        raise ValueError(f"rung must be one of {RUNGS}, got {rung!r}")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"head dim must be one of {HEAD_DIMS}, got {head_dim}")
    if dtype not in TORCH_TO_GL:
        raise ValueError(f"dtype must be float16 or bfloat16, got {dtype}")


def rung_config(rung, head_dim, config=None):
    """default_config with the overrides of `config`, checked."""
    cfg = dict(default_config(rung, head_dim), **(config or {}))
    if cfg["BLOCK_N"] not in BLOCK_NS:
        raise ValueError(f"BLOCK_N must be one of {BLOCK_NS}, got {cfg['BLOCK_N']}")
    if cfg.get("PINGPONG") and rung != 4:
        raise ValueError(f"PINGPONG orders rung 4's two consumer partitions; rung {rung} has one")
    if cfg.get("PERSISTENT") and rung < 3:
        raise ValueError(f"PERSISTENT needs the producer partition of rungs 3-4; rung {rung} has none")
    if cfg.get("SCHEDULED") and not cfg.get("PERSISTENT"):
        raise ValueError("SCHEDULED orders the work items of a PERSISTENT launch; set PERSISTENT too")
    if cfg.get("OWN_RANGES") and rung != 4:
        raise ValueError(f"OWN_RANGES splits rung 4's key range between its two consumers; rung {rung} has one")
    if cfg.get("OWN_RANGES", 0) not in (0, 1, 2):
        raise ValueError(f"OWN_RANGES is 0, 1 or 2 (2: keys from the diagonal down), got {cfg['OWN_RANGES']!r}")
    if cfg.get("OWN_RANGES") == 2 and (not cfg.get("PERSISTENT") or any(
            cfg.get(flag) for flag in ("PINGPONG", "SPLIT_EMPTY", "Q_EARLY", "LATE_EPILOGUE"))):
        raise ValueError("OWN_RANGES=2 visits a PERSISTENT program's keys from the diagonal down: it needs "
                         "PERSISTENT, without PINGPONG, SPLIT_EMPTY, Q_EARLY or LATE_EPILOGUE")
    if cfg.get("SPLIT_EMPTY") and rung < 3:
        raise ValueError(f"SPLIT_EMPTY frees K and V to the producer partition of rungs 3-4; rung {rung} has none")
    if cfg.get("Q_AHEAD") and not cfg.get("PERSISTENT"):
        raise ValueError("Q_AHEAD loads a PERSISTENT program's next Q a whole item ahead; set PERSISTENT too")
    if cfg.get("Q_AHEAD") and cfg.get("Q_REGS"):
        raise ValueError("Q_AHEAD and Q_REGS both load the next item's Q early: choose one")
    if cfg.get("Q_EARLY") and (not cfg.get("PERSISTENT") or cfg.get("Q_REGS") or cfg.get("Q_AHEAD")):
        raise ValueError("Q_EARLY loads a PERSISTENT program's next Q before the item's last P·V: it needs "
                         "PERSISTENT, without Q_REGS or Q_AHEAD")
    if cfg.get("CHAIN_RANGES") and (rung < 2 or cfg.get("OWN_RANGES") or cfg.get("Q_AHEAD") or cfg.get("Q_EARLY")):
        raise ValueError("CHAIN_RANGES pipelines the key ranges of rungs 2-4: it needs rung 2, 3 or 4, without "
                         "OWN_RANGES, Q_AHEAD or Q_EARLY")
    if cfg.get("TABLE_AHEAD") and (not cfg.get("SCHEDULED") or cfg.get("Q_AHEAD") or cfg.get("Q_REGS")):
        raise ValueError("TABLE_AHEAD reads a SCHEDULED launch's work table an item ahead: it needs SCHEDULED, "
                         "without Q_AHEAD or Q_REGS")
    if cfg.get("SPLIT_TAIL") and (not cfg.get("PERSISTENT") or cfg.get("SCHEDULED") or cfg.get("Q_AHEAD")):
        raise ValueError("SPLIT_TAIL splits a paired PERSISTENT launch's last round into single tiles: it needs "
                         "PERSISTENT, without SCHEDULED or Q_AHEAD")
    if cfg.get("SWAP_ROWS") and (rung != 4 or not cfg.get("PERSISTENT") or any(
            cfg.get(flag) for flag in ("OWN_RANGES", "Q_REGS", "Q_AHEAD", "Q_EARLY", "CHAIN_RANGES"))):
        raise ValueError("SWAP_ROWS trades rung 4's consumers' row halves between a PERSISTENT program's items: it "
                         "needs rung 4 and PERSISTENT, without OWN_RANGES, Q_REGS, Q_AHEAD, Q_EARLY or CHAIN_RANGES")
    if cfg.get("ONE_LOOP") and (not cfg.get("PERSISTENT") or any(
            cfg.get(flag) for flag in ("OWN_RANGES", "Q_AHEAD", "Q_EARLY", "CHAIN_RANGES"))):
        raise ValueError("ONE_LOOP runs a PERSISTENT work item's key range in one pipeline: it needs PERSISTENT, "
                         "without OWN_RANGES, Q_AHEAD, Q_EARLY or CHAIN_RANGES")
    if cfg.get("O_DIRECT") and not cfg.get("PERSISTENT"):
        raise ValueError("O_DIRECT stores a PERSISTENT program's O from registers; set PERSISTENT too")
    if cfg.get("O_IN_Q") and (not cfg.get("PERSISTENT") or any(
            cfg.get(flag) for flag in ("O_DIRECT", "Q_REGS", "Q_AHEAD", "Q_EARLY"))):
        raise ValueError("O_IN_Q stages a PERSISTENT program's O in its Q buffer: it needs PERSISTENT, without "
                         "O_DIRECT, Q_REGS, Q_AHEAD or Q_EARLY")
    if cfg.get("LATE_EPILOGUE") and (not cfg.get("PERSISTENT") or any(cfg.get(flag) for flag in (
            "O_DIRECT", "O_IN_Q", "Q_AHEAD", "HALF_DIAGONAL", "CHAIN_RANGES", "SWAP_ROWS", "ONE_LOOP"))):
        raise ValueError("LATE_EPILOGUE runs a PERSISTENT work item's epilogue under the next item's first S: it "
                         "needs PERSISTENT, without O_DIRECT, O_IN_Q, Q_AHEAD, HALF_DIAGONAL, CHAIN_RANGES, "
                         "SWAP_ROWS or ONE_LOOP")
    if cfg.get("PROGRAMS_PER_SM", 1) != 1 and not cfg.get("PERSISTENT"):
        raise ValueError("PROGRAMS_PER_SM sizes a PERSISTENT launch's grid; set PERSISTENT too")
    if cfg.get("HALF_DIAGONAL") and (rung != 4 or cfg["BLOCK_N"] != 128 or cfg.get("OWN_RANGES") or cfg.get("Q_REGS")):
        raise ValueError("HALF_DIAGONAL halves the diagonal 128-key tile of rung 4's lower consumer: it needs rung 4 "
                         "and BLOCK_N=128, without OWN_RANGES or Q_REGS")
    return cfg


def _constexprs(rung, causal, cfg, window=False):
    """The kernel's constexpr arguments, in its order (GluonPlan passes them by position)."""
    return dict(IS_CAUSAL=bool(causal), WINDOW=bool(window), RUNG=rung, NUM_BUFFERS=cfg["NUM_BUFFERS"],
                PRODUCER_REGS=cfg.get("PRODUCER_REGS", 24), CONSUMER_REGS=cfg.get("CONSUMER_REGS", 240),
                PINGPONG=bool(cfg.get("PINGPONG", False)), PERSISTENT=bool(cfg.get("PERSISTENT", False)),
                SCHEDULED=bool(cfg.get("SCHEDULED", False)), OWN_RANGES=int(cfg.get("OWN_RANGES", 0)),
                Q_REGS=bool(cfg.get("Q_REGS", False)), SPLIT_EMPTY=bool(cfg.get("SPLIT_EMPTY", False)),
                Q_AHEAD=bool(cfg.get("Q_AHEAD", False)), HALF_DIAGONAL=bool(cfg.get("HALF_DIAGONAL", False)),
                Q_EARLY=bool(cfg.get("Q_EARLY", False)), CHAIN_RANGES=bool(cfg.get("CHAIN_RANGES", False)),
                TABLE_AHEAD=bool(cfg.get("TABLE_AHEAD", False)), SPLIT_TAIL=bool(cfg.get("SPLIT_TAIL", False)),
                SWAP_ROWS=bool(cfg.get("SWAP_ROWS", False)), ONE_LOOP=int(cfg.get("ONE_LOOP", 0)),
                O_DIRECT=bool(cfg.get("O_DIRECT", False)), O_IN_Q=bool(cfg.get("O_IN_Q", False)),
                LATE_EPILOGUE=bool(cfg.get("LATE_EPILOGUE", False)), num_warps=cfg["num_warps"])


def _options(cfg):
    options = dict(num_warps=cfg["num_warps"], num_stages=1)
    if cfg.get("maxnreg"):
        options["maxnreg"] = cfg["maxnreg"]
    return options


def compile_rung(rung, head_dim=128, dtype=torch.bfloat16, causal=True, config=None, capability=90, ones=(),
                 window=False):
    """AOT-compile one rung for an sm_``capability`` GPU, on any machine (no GPU needed): the compiled
    kernel, with ``.asm['ptx']``, ``.asm['cubin']`` and ``.metadata`` (``shared`` = bytes of shared memory).
    ``ones``: integer arguments (H, GROUP, N_Q, N_KV) compiled as the constant 1, as the JIT launcher would
    when a call passes 1 without the kernel's ``do_not_specialize`` (one head, no grouping, one query, one key)."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    _check_rung(rung, head_dim, dtype)
    cfg = rung_config(rung, head_dim, config)
    q_box = [1, 1, cfg["BLOCK_M"] // consumers(rung), head_dim]
    kv_box = [1, 1, cfg["BLOCK_N"], head_dim]
    constexprs = dict(_constexprs(rung, causal, cfg, window), **{name: 1 for name in ones})
    signature = dict(q_desc=descriptor_signature(q_box, dtype), k_desc=descriptor_signature(kv_box, dtype),
                     v_desc=descriptor_signature(kv_box, dtype), o_desc=descriptor_signature(q_box, dtype),
                     lse_ptr="*fp32", H="i32", GROUP="i32", N_Q="i32", N_KV="i32", qk_scale="fp32",
                     window_left="i32", BH="i32", schedule_ptr="*i32", o_ptr="*" + SIG_DTYPE[dtype])
    signature.update({name: "constexpr" for name in constexprs})
    src = GluonASTSource(_attention_fwd_hopper, signature=signature, constexprs=constexprs)
    return _compile_keeping_ptxas_log(src, GPUTarget("cuda", capability, 32), _options(cfg))


# sha256 of a cubin -> the ``ptxas -v`` log of the compile in this process that assembled it (resource_usage reads
# it instead of assembling the PTX again; a compile served from Triton's cache runs no ptxas and leaves no log)
_PTXAS_LOGS = {}


def _cubin_key(compiled):
    """_PTXAS_LOGS's key for a compiled kernel: the sha256 of its cubin."""
    import hashlib
    return hashlib.sha256(compiled.asm["cubin"]).hexdigest()


def _compile_keeping_ptxas_log(src, target, options):
    """triton.compile with Triton's ptxas log (its ``-v`` output, which Triton prints when asked) kept in
    _PTXAS_LOGS. What the compile prints is printed as before, the log only when the caller asked for it."""
    import contextlib
    import io

    from triton import knobs

    printed = io.StringIO()
    shown = knobs.nvidia.dump_ptxas_log                  # the caller asked to see the log: it is printed still
    with knobs.nvidia.scope(), contextlib.redirect_stdout(printed):
        knobs.nvidia.dump_ptxas_log = True
        compiled = triton.compile(src, target=target, options=options)
    text = printed.getvalue()
    if "ptxas info" in text:
        _PTXAS_LOGS[_cubin_key(compiled)] = text
    if shown or "ptxas info" not in text:
        print(text, end="")
    return compiled


def resource_usage(compiled):
    """{'registers', 'spill_stores', 'spill_loads', 'stack', 'shared', 'sass_registers', 'setmaxnreg'} of a
    compiled kernel, read from ptxas's -v log (kept from the compile when compile_rung assembled it in this
    process, otherwise the PTX is assembled again, ~ seconds) and the cubin's SASS (cuobjdump) -- this works
    without a GPU, where the launcher's ``n_regs``/``n_spills`` are not filled in.

    ``registers`` is ptxas's count at launch (``.maxnreg`` where set); a warp-specialised kernel's partitions
    then move to their ``setmaxnreg`` values (the PTX's, sorted) and their code may use up to those:
    ``sass_registers`` is 1 + the highest register R<n> any instruction names, over all partitions."""
    import re
    import subprocess
    import tempfile
    from pathlib import Path

    from triton import knobs
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    capability = compiled.metadata.target.arch
    log = _PTXAS_LOGS.get(_cubin_key(compiled))
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        if log is None:                                  # not assembled in this process: assemble it again
            ptx.write_text(compiled.asm["ptx"])
            log = subprocess.run([get_ptxas(capability).path, "-v",
                                  f"--gpu-name={sm_arch_from_capability(capability)}", str(ptx), "-o", str(cubin)],
                                 capture_output=True, text=True, check=True).stderr
        else:
            cubin.write_bytes(compiled.asm["cubin"])
        sass = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", str(cubin)], capture_output=True, text=True,
                              check=True).stdout
    number = lambda pattern: int(m.group(1)) if (m := re.search(pattern, log)) else None
    names = [int(n) for n in re.findall(r"\bR(\d+)\b", sass)]
    setmaxnreg = sorted({int(n) for n in re.findall(r"setmaxnreg\.\w+\.sync\.aligned\.u32\s+(\d+)",
                                                   compiled.asm["ptx"])})
    return dict(registers=number(r"Used (\d+) registers"), spill_stores=number(r"(\d+) bytes spill stores"),
                spill_loads=number(r"(\d+) bytes spill loads"), stack=number(r"(\d+) bytes stack frame"),
                shared=compiled.metadata.shared, sass_registers=max(names, default=-1) + 1,
                setmaxnreg=" ".join(map(str, setmaxnreg)))


def _require_hopper(*tensors):
    if not all(t.is_cuda for t in tensors):
        raise RuntimeError("attention_gluon needs CUDA tensors on an sm_90 (Hopper) GPU")
    major, minor = torch.cuda.get_device_capability(tensors[0].device)
    if (major, minor) != (9, 0):
        raise RuntimeError(f"attention_gluon's kernels use wgmma and TMA for sm_90 (Hopper) only; this GPU is "
                           f"sm_{major}{minor}")


def gluon_launch(q, k, v, o, causal, scale, rung, config, window_left=-1):
    """What a launch of the Gluon kernel for these inputs fixes once: (grid, layouts, scalars, constexprs,
    options). layouts: (shape, strides, box, padding) of the q, k, v and o (torch.empty_like(q)) descriptors;
    scalars: H, GROUP, N_Q, N_KV, qk_scale, window_left (-1: no window; a window needs causal), B·H and an int32
    tensor, a SCHEDULED launch's work table (schedule_table) or else one unused element (a launch passes O's
    tensor after them, the kernel's o_ptr); constexprs: the
    kernel's compile-time parameters in its order; options: the launch options. `fa2.plan.GluonPlan` builds it
    once per input signature."""
    B, H, N_Q, D = q.shape
    H_kv, N_KV = k.shape[1], k.shape[2]
    _check_rung(rung, D, q.dtype)
    if k.shape != (B, H_kv, N_KV, D) or v.shape != k.shape or H % H_kv:
        raise ValueError(f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: need k = v = "
                         f"(B, H_kv, N_KV, D) with H % H_kv == 0")
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError("q, k and v must share a dtype")
    if q.stride(-1) != 1 or k.stride(-1) != 1 or v.stride(-1) != 1:
        raise ValueError("q, k and v need a unit last stride (TMA)")
    if window_left >= 0 and not causal:
        raise ValueError("a window (window_left >= 0) needs causal=True: its right bound is the diagonal")
    cfg = rung_config(rung, D, config)
    q_rows = cfg["BLOCK_M"] // consumers(rung)   # rung 4: each consumer partition loads and stores its half
    layout = lambda t, rows: (list(t.shape), list(t.stride()), [1, 1, rows, D], "zero")
    layouts = [layout(q, q_rows), layout(k, cfg["BLOCK_N"]), layout(v, cfg["BLOCK_N"]), layout(o, q_rows)]
    grid = (triton.cdiv(N_Q, cfg["BLOCK_M"]), B * H, 1)
    schedule = None
    if cfg.get("PERSISTENT"):   # one program per SM at most (rungs 3-4 fill an SM's registers), over the tiles
        paired = causal and window_left < 0 and not cfg.get("SCHEDULED")
        per_sm = cfg.get("PROGRAMS_PER_SM", 1)    # more where a program holds half an SM (rung 3, 64 rows)
        num_m, programs = grid[0], max(1, min(units(grid[0], B * H, paired), per_sm * _sm_count(q.device)))
        grid = (programs, 1, 1)
        if cfg.get("SCHEDULED"):
            costs = item_costs(num_m, N_Q, N_KV, cfg["BLOCK_M"], cfg["BLOCK_N"], causal, window_left)
            if cfg["SCHEDULED"] == 2 and causal and window_left < 0:
                schedule = paired_schedule_table(costs, B * H, programs)
            else:
                schedule = schedule_table(costs, B * H, programs, causal)
            schedule = schedule.to(q.device)
    if schedule is None:        # the kernel's schedule_ptr, read only by SCHEDULED launches
        schedule = torch.zeros(1, dtype=torch.int32, device=q.device)
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    scalars = (H, H // H_kv, N_Q, N_KV, scale * LOG2E, int(window_left), B * H, schedule)
    options = {key: value for key, value in _options(cfg).items() if key != "num_warps"}
    return grid, layouts, scalars, _constexprs(rung, causal, cfg, window_left >= 0), options


def _sm_count(device):
    return torch.cuda.get_device_properties(device).multi_processor_count


def units(num_m, BH, paired):
    """The kernel's ``_units`` in plain Python (keep the two in step); paired: causal without a window."""
    return BH * (-(-num_m // 2) if paired else num_m)


def item_count(pid, nprog, num_m, BH, paired, split_tail=False):
    """The kernel's ``_item_count`` in plain Python (keep the two in step); split_tail: SPLIT_TAIL (paired only)."""
    if paired and split_tail:
        whole, last = divmod(units(num_m, BH, paired), nprog)
        if tail_split(last, nprog):
            return 2 * whole + (pid < 2 * last) + (pid > 2 * nprog - 1 - 2 * last)
    return max(-(-(units(num_m, BH, paired) - pid) // nprog), 0) * (2 if paired else 1)


def tail_split(last, nprog):
    """The kernel's ``_tail_split`` in plain Python (keep the two in step)."""
    return 3 * last <= 2 * nprog


def tail_item(k, pid, nprog, whole, last):
    """The kernel's ``_tail_item`` in plain Python (keep the two in step): (unit, 0 longest / 1 shortest)."""
    t = pid if k == 2 * whole and pid < 2 * last else 2 * nprog - 1 - pid
    return (whole * nprog + t, 0) if t < last else (whole * nprog + 2 * last - 1 - t, 1)


# A query tile's fixed cost in SCHEDULED's model, in key tiles: its Q load, first K/V wait and epilogue, which a
# persistent program overlaps only in part with its neighbours' key loops.
ITEM_OVERHEAD_TILES = 1
# schedule_table: the last TAIL_ROUNDS·programs query tiles go longest first
TAIL_ROUNDS = 4


def item_costs(num_m, N_Q, N_KV, BLOCK_M, BLOCK_N, causal, window_left=-1):
    """The modelled cost of each query tile 0..num_m-1 of a head: its key tiles (kv_range) plus
    ITEM_OVERHEAD_TILES."""
    costs = []
    for m in range(num_m):
        kv_start, _, _, kv_end = kv_range(m * BLOCK_M, N_Q, N_KV, BLOCK_M, BLOCK_N, causal, window_left)
        costs.append(max(-(-(kv_end - kv_start) // BLOCK_N), 0) + ITEM_OVERHEAD_TILES)
    return costs


def schedule_table(costs, BH, nprog, causal):
    """A SCHEDULED launch's work table, as the kernel reads it (_item_count, _work_item): int32
    [offsets (nprog + 1)] + [items of program 0] + [items of program 1] + ..., an item u = pid_bh·num_m + pid_m.

    List scheduling, as the hardware does it for a grid of one program per tile, but planned on the host with
    `costs` (item_costs, per query tile of a head): the query tiles are taken head by head (under causal a
    head's longest first), each to the program whose modelled work is least so far (ties: the lower program).
    Tiles that run at one time are neighbours in that order, so they share a few heads' K and V in L2. The last
    TAIL_ROUNDS·nprog tiles are taken longest first instead (as in LPT scheduling), so that the programs end
    together: in the model the busiest program has at most ~1 % more work than the mean at chapter 6's causal
    headline shapes, against ~3 % for the pairs of a paired launch (tests/test_gluon.py)."""
    num_m = len(costs)
    order = range(num_m - 1, -1, -1) if causal else range(num_m)
    items = [(pid_bh, pid_m) for pid_bh in range(BH) for pid_m in order]
    tail = max(len(items) - TAIL_ROUNDS * nprog, 0)
    items[tail:] = sorted(items[tail:], key=lambda item: -costs[item[1]])    # stable: head by head within a cost
    return _list_schedule(items, [[] for _ in range(nprog)], [0] * nprog, costs)


def _list_schedule(items, rows, loads, costs):
    """Deal `items` (pid_bh, pid_m), in their order, each to the program whose modelled work so far (`loads`, then
    `costs` per query tile) is least (ties: the lower program), appended to its row of `rows`: the kernel's
    table of those rows (_table)."""
    import heapq

    num_m = len(costs)
    heap = [(load, p) for p, load in enumerate(loads)]
    heapq.heapify(heap)
    for pid_bh, pid_m in items:
        load, p = heap[0]
        rows[p].append(pid_bh * num_m + pid_m)
        heapq.heapreplace(heap, (load + costs[pid_m], p))
    return _table(rows)


def _table(rows):
    """The kernel's table of per-program rows of items: offsets (len(rows) + 1), then the rows one after another."""
    offsets = [0]
    for row in rows:
        offsets.append(offsets[-1] + len(row))
    return torch.tensor(offsets + [u for row in rows for u in row], dtype=torch.int32)


def paired_schedule_table(costs, BH, nprog):
    """SCHEDULED=2 (causal, no window): a PERSISTENT launch's paired order as a table, but for its last round.

    A paired launch (_work_item) hands program p the units p, p + nprog, p + 2·nprog, ..., a unit being a head's
    k-th longest query tile then its k-th shortest, so that every unit has the same key-tile count. When the
    units do not fill the last round (U = BH·⌈num_m/2⌉ not a multiple of nprog), the programs that take a last unit
    run a whole unit longer than the others: at (32, 32, 512, 128) 68 of 132 programs take 16 units, 64 take 15.
    This table keeps the paired order for every whole round and deals the last round's tiles one at a time,
    longest first, each to the program with the least modelled work (`costs`: item_costs), so the busiest program
    ends about half a unit earlier. (The items of a unit are listed in the kernel's order; a phantom tile, the
    second half of an odd num_m's middle unit, is left out.)"""
    num_m = len(costs)
    per_head = -(-num_m // 2)
    total = BH * per_head

    def unit(u):                          # _work_item's PAIRED unit u: (pid_bh, pid_m) longest, then shortest
        pid_bh, r = divmod(u, per_head)
        longest = num_m - 1 - r
        return [(pid_bh, m) for m in ((longest, r) if r != longest else (longest,))]

    whole = total // nprog * nprog
    rows = [[] for _ in range(nprog)]
    loads = [0] * nprog
    for u in range(whole):
        for pid_bh, pid_m in unit(u):
            rows[u % nprog].append(pid_bh * num_m + pid_m)
            loads[u % nprog] += costs[pid_m]
    last = sorted((item for u in range(whole, total) for item in unit(u)), key=lambda item: -costs[item[1]])
    return _list_schedule(last, rows, loads, costs)


def scheduled_item(table, k, pid, nprog, num_m, H, GROUP, BLOCK_M):
    """The kernel's SCHEDULED ``_work_item`` in plain Python over a schedule_table (keep the two in step):
    (off_b, off_h, off_kvh, pid_bh, m_start) of program pid's k-th query tile."""
    u = int(table[nprog + 1 + int(table[pid]) + k])
    pid_bh, pid_m = u // num_m, u % num_m
    off_h = pid_bh % H
    return pid_bh // H, off_h, off_h // GROUP, pid_bh, pid_m * BLOCK_M


def table_entry(table, nprog, row, k, n_items):
    """The kernel's TABLE_AHEAD ``_table_entry`` in plain Python: (the unit of the program's item k, the table
    index it reads), or (0, None) past the program's last item, where the masked load reads nothing."""
    if k >= n_items:
        return 0, None
    index = nprog + 1 + row + k
    return int(table[index]), index


def work_item(k, pid, nprog, num_m, BH, H, GROUP, causal, BLOCK_M, paired=None, split_tail=False):
    """(off_b, off_h, off_kvh, pid_bh, m_start) of program pid's k-th query tile in a PERSISTENT launch: the
    kernel's ``_work_item`` in plain Python (keep the two in step), for the CPU tests. paired defaults to
    causal (no window); split_tail: SPLIT_TAIL."""
    if causal if paired is None else paired:
        u, second = pid + (k // 2) * nprog, k % 2
        if split_tail:
            whole, last = divmod(units(num_m, BH, True), nprog)
            if k >= 2 * whole and tail_split(last, nprog):
                u, second = tail_item(k, pid, nprog, whole, last)
        per_head = -(-num_m // 2)
        r = u % per_head
        longest = num_m - 1 - r
        shortest = r + (r == longest) * (num_m - r)
        pid_m = longest + second * (shortest - longest)
    else:
        u = pid + k * nprog
        per_head = num_m
        pid_m = u % per_head
        if causal:
            pid_m = num_m - 1 - pid_m
    pid_bh = u // per_head
    off_h = pid_bh % H
    return pid_bh // H, off_h, off_h // GROUP, pid_bh, pid_m * BLOCK_M


def gluon_descriptors(tensors, layouts):
    """Gluon host TensorDescriptors of `tensors` with `layouts` (gluon_launch's), in order."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    return [TensorDescriptor(t, shape, strides, box, _layout(box, t.dtype), padding)
            for t, (shape, strides, box, padding) in zip(tensors, layouts)]


def attention_gluon(q, k, v, causal=False, scale=None, rung=1, config=None, window_left=-1):
    """(o, lse) of attention over (B, H, N, D) q and (B, H_kv, N_KV, D) k, v (H % H_kv == 0), D in {64, 128},
    fp16 or bf16; lse is (B, H, N_Q) fp32 in natural log. Runs only on an sm_90 GPU (RuntimeError elsewhere).
    Measured and checked on an H200: see the module docstring and chapter 12. Every call goes through Triton's
    JIT (tens to hundreds of microseconds of host time); `fa2.attention` launches it through a plan instead.
    window_left >= 0 (causal only): flash-attn's window_size=(window_left, 0), key tiles outside the window
    skipped."""
    _require_hopper(q, k, v)
    B, H, N_Q, _ = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N_Q, device=q.device, dtype=torch.float32)
    grid, layouts, scalars, constexprs, options = gluon_launch(q, k, v, o, causal, scale, rung, config, window_left)
    _attention_fwd_hopper[grid](*gluon_descriptors((q, k, v, o), layouts), lse, *scalars, o, **constexprs,
                                **options)
    return o, lse


def report(dtypes=(torch.bfloat16, torch.float16)):
    """Compile every rung × head dim × dtype × causal for sm_90 and print registers, spills and shared memory
    (``python -m fa2.gluon.attention_hopper``; no GPU needed)."""
    print("rung  D    dtype     causal  regs  SASS regs  spill st/ld (B)  smem (B)  setmaxnreg")
    for rung in RUNGS:
        for D in HEAD_DIMS:
            for dtype in dtypes:
                for causal in (False, True):
                    u = resource_usage(compile_rung(rung, D, dtype, causal))
                    print(f"{rung:<5} {D:<4} {str(dtype)[6:]:9} {causal!s:7} {u['registers']:<5} "
                          f"{u['sass_registers']:<10} {u['spill_stores']}/{u['spill_loads']:<14} {u['shared']:<9} "
                          f"{u['setmaxnreg']}")


if __name__ == "__main__":
    report()
