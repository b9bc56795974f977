"""`fa2.decode`: Flash-Decoding over a KV cache -- input checks, the split count, launch plans, a custom op.

    o = fa2.decode(q, k_cache, v_cache, cache_seqlens)                  # q (B, Hq, Nq<=16, D), cache (B, Hkv, N, D)
    o, lse = fa2.decode(q, k_pages, v_pages, cache_seqlens, block_table, return_lse=True)   # paged cache

The kernels are chapter 9's (`fa2/chapters/flash_decoding.py`). Everything the host decides -- the split count,
the tile sizes, the grid -- depends on shapes, strides, dtypes and flags only, never on the values in
`cache_seqlens`: a serving loop can capture one call in a CUDA graph and replay it while the cache grows.

Semantics: query i of the Nq new tokens sits at position cache_seqlens[b] - Nq + i and sees the keys at or before
it (causal, bottom-right); `window=(left, right)` (flash-attn's window_size, -1 unbounded) also hides keys before
position - left (the right bound adds nothing to causal); `softcap` c maps scores s to c·tanh(s/c) (0/None: off).
`cache_seqlens` None means full rows; lengths are clamped to [0, capacity] on the device. Block-table entries are
trusted (checking them would need a copy to the host). Rows that see no key give 0 and lse -inf.
"""

import functools
import numbers
from typing import Optional

import torch
import triton

from fa2 import dispatch, runtime, validate
from fa2._triton_compat import DirectLaunch
from fa2.chapters.flash_decoding import (cache_geometry, combine_counters, decode_launch, decode_tiles,
                                         num_splits_heuristic)
from fa2.plan import cache_plan

MAX_QUERIES = 16          # query tokens per call: 1 for decoding, a few for speculative verification
MAX_HEAD_DIM = 256
MAX_SPLITS = 128
MIN_PAGE_SIZE = 16
# Launch options on a GPU (`python -m fa2.bench --sweep decode` times the candidates). CTAS_PER_SM: programs resident per SM
# that the split heuristic fills, as in FlashAttention-2's split-KV launch.
GPU_CONFIG = dict(block_n=64, num_warps=4, num_stages=3)
CTAS_PER_SM = 2
# Triton 3.6's pipeliner gives the block-table load of a paged cache stages of its own: compiled for sm_90, the
# paged loop double-buffers K and V (as the contiguous one does at num_stages=3) only from num_stages=5; below
# that it keeps one buffer and waits for every tile (ttgir: `local_alloc ... 1x64x128` and `async_wait num=0`).
PAGED_EXTRA_STAGES = 2
# The fused combine (chapter 9, section 9.11): with splits, the last split of each tile to finish combines, so a
# call is one launch instead of two. Opt-in, per plan, through the config key "fused_combine" (DecodePlan(...,
# config=dict(fused_combine=True)); `python -m fa2.bench --sweep decode` times it as the fa2_fused provider). This
# default applies to plans made after it is set, fa2.decode's included. Off: on an H200 it passes the GPU tests but
# is slower at B=1 (2.0-2.4 us per call at 1k and 8k keys, book/results/decode_fused.csv) and changes nothing at
# B=32, where the split rule picks one split and there is no combine to fuse.
FUSED_COMBINE = False
# Programmatic Dependent Launch (PDL, Hopper sm_90+): every kernel of a plan is launched with Triton's launch_pdl,
# so it may start while the kernel before it in the stream finishes (the combine behind the split-KV kernel's tail,
# the split-KV kernel behind the previous kernel); each waits (griddepcontrol.wait, the kernels' USE_PDL) before
# its first read of what earlier kernels wrote. The config key "pdl" (DecodePlan(..., config=dict(pdl=...))):
# True, False, or "auto" (the default): PDL when the plan has at least PDL_MIN_SPLITS splits. Measured on an H200
# over the decode family (book/results/decode_pdl.csv, gpu/decode_pdl.sh with FULL=1): with 16-32 splits (every
# B=1 shape) PDL took 0.66-2.80 us off each call, contiguous and paged (8k keys: 15.7 -> 14.4 us); with 4 splits
# (B=8) it saved 0.84-2.1 us on contiguous caches but made paged ones 11.8-21.4 % slower (1k keys: 15.6 -> 19.0
# us); with one split (B=32) it made every call 10.0-36.1 % slower (4k keys: 124 -> 168 us). Chapter 9, section
# 9.12. This default applies to plans made after it is set. A performance option only: where it cannot run (the
# interpreter, GPUs below sm_90) it is ignored and the plan launches exactly as without it.
PDL = "auto"
PDL_MIN_SPLITS = 8
PDL_CHOICES = (True, False, "auto")
# Programs of two warps over 32-key tiles (four stages) where a contiguous cache is split FEW_WARPS_MIN_SPLITS
# ways or more (few batch rows and KV heads) and holds FEW_WARPS_MIN_KEYS keys or more: with two warps instead of
# four, each tile's row max and sum cross fewer warps through shared memory (the likely reason; not profiled).
# Measured on an H200 at B = 1, 32 query heads over 8 KV heads, D = 128, one query, no window or softcap, in three
# runs of five interleaved rounds (book/results/decode_warps.md): 2.3-7.1 % faster than GPU_CONFIG at 4k-128k keys
# (at 128k past cuDNN in the two runs that timed it), 8 % slower at 1k, 4-9 % slower on paged caches from 32k
# keys, and 2.5-6.1 % slower in calls without cache_seqlens (full rows: another compiled kernel;
# book/results/decode_few_warps_full.csv). So: sm_90,
# contiguous caches, calls with cache_seqlens, D = 128 and one tile of packed query rows (16 rows at most) only,
# where it was measured; the split count stays the one chosen for GPU_CONFIG's tiles.
FEW_WARPS_CONFIG = dict(block_n=32, num_warps=2, num_stages=4)
FEW_WARPS_MIN_SPLITS = 16
FEW_WARPS_MIN_KEYS = 4096
# The interpreter: small tiles, and a pretend GPU of 4 SMs so that small CPU shapes split too.
CPU_CONFIG = dict(block_n=16, num_warps=4, num_stages=1)
CPU_SM_COUNT = 4


WHO = "fa2.decode"


def _fail(kind, message):
    raise kind(f"{WHO}: {message}")


def _check_int32(name, t, shape, q):
    if not isinstance(t, torch.Tensor):
        _fail(TypeError, f"{name} must be a torch.Tensor or None, got {type(t).__name__}")
    if t.dtype != torch.int32:
        _fail(TypeError, f"{name} must be int32, got {t.dtype}")
    if tuple(t.shape) != shape:
        _fail(ValueError, f"{name} must have shape {shape}, got {tuple(t.shape)}")
    if t.device != q.device:
        _fail(ValueError, f"{name} is on {t.device} but q is on {q.device}")


def _check_inputs(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window, softcap):
    """Raise TypeError/ValueError naming the argument for anything the kernels cannot compute correctly."""
    layout = "(B, Hkv, N, D)" if block_table is None else "(num_pages, page_size, Hkv, D)"
    validate.check_tensor(WHO, "q", q, 4, "(B, H, N, D)")
    validate.check_tensor(WHO, "k_cache", k_cache, 4, layout, like=q)
    validate.check_tensor(WHO, "v_cache", v_cache, 4, layout, like=q)
    validate.check_device(WHO, q)
    B, H_Q, N_Q, D = q.shape
    if N_Q > MAX_QUERIES:
        _fail(ValueError, f"q has {N_Q} query tokens (dim 2); decode takes at most {MAX_QUERIES}, "
                          "use fa2.attention for a prefill")
    validate.check_head_dim(WHO, D)
    if v_cache.shape != k_cache.shape:
        _fail(ValueError, f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    if block_table is None:
        Bk, H_KV, _, Dk = k_cache.shape
        if Bk != B:
            _fail(ValueError, f"k_cache has batch {Bk} {layout} but q has batch {B}")
    else:
        layout += " with a block_table"
        _, page_size, H_KV, Dk = k_cache.shape
        if not isinstance(block_table, torch.Tensor):
            _fail(TypeError, f"block_table must be a torch.Tensor or None, got {type(block_table).__name__}")
        if block_table.dim() != 2 or block_table.shape[1] == 0:
            _fail(ValueError, f"block_table must be (B, max_pages) with max_pages >= 1, "
                              f"got shape {tuple(block_table.shape)}")
        _check_int32("block_table", block_table, (B, block_table.shape[1]), q)
        if page_size < MIN_PAGE_SIZE or page_size & (page_size - 1):
            _fail(ValueError, f"page_size (k_cache dim 1) must be a power of two >= {MIN_PAGE_SIZE}, got {page_size}")
    if Dk != D:
        _fail(ValueError, f"k_cache has head dim {Dk} {layout} but q has head dim {D}")
    if H_Q % H_KV:
        _fail(ValueError, f"q's {H_Q} heads are not a multiple of k_cache's {H_KV} heads {layout}")
    if cache_seqlens is not None:
        _check_int32("cache_seqlens", cache_seqlens, (B,), q)
    validate.check_no_grad(WHO, q, k_cache, v_cache)
    validate.check_scale(WHO, scale)
    if num_splits is not None and (not isinstance(num_splits, numbers.Integral) or isinstance(num_splits, bool)
                                   or not 1 <= num_splits <= MAX_SPLITS):
        _fail(ValueError, f"num_splits must be None or an int in [1, {MAX_SPLITS}], got {num_splits!r}")
    validate.check_window(WHO, window)
    validate.check_softcap(WHO, softcap)


def sm_count(device):
    """SMs the split heuristic fills: the GPU's (fa2.dispatch.sm_count), a pretend CPU_SM_COUNT on the CPU."""
    return dispatch.sm_count(device.index) if device.type == "cuda" else CPU_SM_COUNT


@functools.lru_cache(maxsize=None)
def _shared_memory(device_index):
    props = torch.cuda.get_device_properties(device_index)
    return getattr(props, "shared_memory_per_block_optin", 48 * 1024)


def _config(q, paged=False):
    """Launch options for q's device, head dim and cache layout: GPU_CONFIG (PAGED_EXTRA_STAGES more stages for
    a paged cache), with fewer stages, then smaller key tiles, where the pipeline's K and V buffers would not
    fit in shared memory (a T4 has 64 KB, an H200 227 KB)."""
    if q.device.type != "cuda":
        return CPU_CONFIG
    extra = PAGED_EXTRA_STAGES if paged else 0
    cfg = dict(GPU_CONFIG, num_stages=GPU_CONFIG["num_stages"] + extra)
    head_dim = max(16, triton.next_power_of_2(q.shape[-1]))
    budget = 0.75 * _shared_memory(q.device.index)
    buffers = lambda: max(1, cfg["num_stages"] - 1 - extra)          # K and V tiles in flight
    while buffers() * cfg["block_n"] * head_dim * 2 * q.element_size() > budget:
        if buffers() > 1:
            cfg["num_stages"] -= 1
        elif cfg["block_n"] > 16:
            cfg["block_n"] //= 2
        else:
            break
    return cfg


def few_warps(capability, paged, head_dim, packed_rows, capacity, num_splits, has_seqlens=True):
    """Does FEW_WARPS_CONFIG replace GPU_CONFIG for this launch? (See FEW_WARPS_CONFIG: where it was measured.)
    capability: the GPU's (major, minor), None under the interpreter; has_seqlens: the call passes
    cache_seqlens (without them, full rows, the kernel compiled for them was slower with it)."""
    return (capability is not None and tuple(capability) == (9, 0) and not paged and has_seqlens
            and head_dim == 128 and packed_rows <= 16 and capacity >= FEW_WARPS_MIN_KEYS
            and num_splits >= FEW_WARPS_MIN_SPLITS)


def _capability(device):
    """A CUDA device's compute capability; None for the interpreter's CPU tensors."""
    return validate.capability(device.index) if device.type == "cuda" else None


def _launch_config(q, k_cache, block_table, num_splits=None, has_seqlens=True):
    """(launch options, split count) of fa2.decode's default launch: `_config`'s, or FEW_WARPS_CONFIG where
    `few_warps` says so (the split count then still the one chosen for `_config`'s tiles)."""
    cfg = _config(q, block_table is not None)
    splits = num_splits or choose_num_splits(q, k_cache, block_table, cfg["block_n"])
    h_kv, _, capacity = cache_geometry(k_cache, block_table)
    rows = (q.shape[1] // h_kv) * q.shape[2]
    if few_warps(_capability(q.device), block_table is not None, q.shape[-1], rows, capacity, splits, has_seqlens):
        cfg = dict(FEW_WARPS_CONFIG)
    return cfg, splits


def plan_config(q, k_cache, block_table, num_splits=None, config=None, has_seqlens=True):
    """(launch options, split count) of a DecodePlan: `config`'s tiles (block_n, num_warps, num_stages) on
    `_config`'s, or without any of them `_launch_config`'s, with config's other keys (fused_combine, pdl) added.
    has_seqlens: the plan's calls pass cache_seqlens."""
    config = dict(config or {})
    if config.keys() & {"block_n", "num_warps", "num_stages"}:          # given tiles
        cfg = dict(_config(q, block_table is not None), **config)
        return cfg, num_splits or choose_num_splits(q, k_cache, block_table, cfg["block_n"])
    cfg, num_splits = _launch_config(q, k_cache, block_table, num_splits, has_seqlens)  # fa2.decode's own
    return dict(cfg, **config), num_splits


@functools.lru_cache(maxsize=4096)
def _num_splits(programs, n_tiles, slots):
    return num_splits_heuristic(programs, n_tiles, slots, MAX_SPLITS)


def choose_num_splits(q, k_cache, block_table=None, block_n=None):
    """The split count `fa2.decode` uses for these shapes: from B, Hkv, the cache's capacity and the SM count."""
    block_n = block_n or _config(q, block_table is not None)["block_n"]
    _, m_tiles, n_tiles = decode_tiles(q, k_cache, block_table, block_n)
    programs = q.shape[0] * cache_geometry(k_cache, block_table)[0] * m_tiles     # B · H_KV · M tiles
    return _num_splits(programs, n_tiles, sm_count(q.device) * CTAS_PER_SM)


def pdl_supported(device):
    """Can kernels on `device` be launched with PDL? A CUDA GPU of compute capability 9.0 or newer, and compiled
    kernels: the interpreter cannot run griddepcontrol."""
    return device.type == "cuda" and not runtime.INTERPRET and validate.capability(device.index)[0] >= 9


def _window_left(window):
    return -1 if window is None else int(window[0])


class DecodePlan:
    """One input signature's decode: split count, grid, strides and scalars fixed; each call allocates the
    outputs and the workspace and launches the split-KV kernel (and the combine when there are splits).

    config: launch options over `_config`'s (block_n, num_warps, num_stages; without any of them the plan takes
    `_launch_config`'s, FEW_WARPS_CONFIG where it applies), "fused_combine" (default
    FUSED_COMBINE): with splits, the split-KV kernel combines too (one launch), and "pdl" (default PDL; True,
    False or "auto": with at least PDL_MIN_SPLITS splits): launch with Programmatic Dependent Launch where
    `pdl_supported` (ignored elsewhere; `self.pdl` says which). The fused combine's arrival
    counters belong to the plan (allocated and zeroed once here; each call leaves them at zero), so one plan
    must not run on two streams at once: two calls in flight would count into the same counters."""

    def __init__(self, q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window_left, softcap,
                 config=None):
        cfg, num_splits = plan_config(q, k_cache, block_table, num_splits, config, cache_seqlens is not None)
        fused = bool(cfg.pop("fused_combine", FUSED_COMBINE))
        pdl = cfg.pop("pdl", PDL)
        if pdl not in PDL_CHOICES:
            raise ValueError(f"fa2.decode: config pdl must be True, False or 'auto'; got {pdl!r}")
        B, H_Q, N_Q, D = q.shape
        self.num_splits = num_splits
        if pdl == "auto":
            pdl = self.num_splits >= PDL_MIN_SPLITS
        self.pdl = pdl and pdl_supported(q.device)
        self.lse_shape = (B, H_Q, N_Q)
        self.part_shape = (B, H_Q, N_Q, self.num_splits, D)
        self.counters = None
        if fused and self.num_splits > 1:
            self.counters = combine_counters(q, k_cache, block_table, cfg["block_n"])
        o, lse, o_part, lse_part = self._outputs(q)
        launches = decode_launch(q, k_cache, v_cache, cache_seqlens, block_table, o, lse, o_part, lse_part, scale,
                                 self.num_splits, window_left, softcap, counters=self.counters, pdl=self.pdl,
                                 **cfg)
        (kernel, grid, args, options), *combine = launches
        self.split_kv = DirectLaunch(kernel, grid, options, q.device.index)
        self.split_kv_scalars = args[10:]             # everything after the ten tensors
        self.has_seqlens, self.paged = cache_seqlens is not None, block_table is not None
        self.combine = None
        if combine:
            kernel, grid, args, options = combine[0]
            self.combine = DirectLaunch(kernel, grid, options, q.device.index)
            self.combine_scalars = args[4:]

    def _outputs(self, q):
        o = torch.empty_like(q)
        lse = torch.empty(self.lse_shape, device=q.device, dtype=torch.float32)
        if self.num_splits == 1:
            return o, lse, None, None
        o_part = torch.empty(self.part_shape, device=q.device, dtype=torch.float32)
        return o, lse, o_part, torch.empty(self.part_shape[:-1], device=q.device, dtype=torch.float32)

    def __call__(self, q, k_cache, v_cache, cache_seqlens=None, block_table=None):
        o, lse, o_part, lse_part = self._outputs(q)
        if self.counters is not None:                 # fused: partials, and the output the last split writes
            tensors = (o_part, lse_part, o, lse, self.counters)
        elif self.combine is not None:
            tensors = (o_part, lse_part, q, q, q)
        else:
            tensors = (o, lse, q, q, q)
        args = (q, k_cache, v_cache, cache_seqlens if self.has_seqlens else q, block_table if self.paged else q,
                *tensors, *self.split_kv_scalars)
        _launch(self.split_kv, args)
        if self.combine is not None:
            _launch(self.combine, (o_part, lse_part, o, lse, *self.combine_scalars))
        return o, lse


def _launch(lean, args):
    """The compiled kernel's launcher once there is one (fa2/_triton_compat.py), the JIT before."""
    if lean.ready():
        lean.direct(*args)
    else:
        lean(*args)


def _layout(t):
    """What a compiled kernel assumes about a tensor argument: shape, strides, dtype, device, 16-byte alignment."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0)


def signature(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window, softcap):
    """Everything a plan depends on (raises AttributeError/TypeError for non-tensors or unhashable flags)."""
    key = (_layout(q), _layout(k_cache), _layout(v_cache), _layout(cache_seqlens), _layout(block_table),
           scale.__class__, scale, num_splits.__class__, num_splits, window.__class__, window,
           softcap.__class__, softcap,
           torch.is_grad_enabled() and (q.requires_grad or k_cache.requires_grad or v_cache.requires_grad))
    hash(key)
    return key


_PLANS = {}
MAX_PLANS = 4096


def _plan(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window, softcap):
    """The cached plan of this signature, made (after the input checks) on a miss."""
    args = (q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window, softcap)
    try:
        return _PLANS[signature(*args)]
    except (KeyError, AttributeError, TypeError):     # new signature, or not tensors / unhashable flags
        pass
    _check_inputs(*args)
    plan = DecodePlan(q, k_cache, v_cache, cache_seqlens, block_table, validate.softmax_scale(q.shape[-1], scale), num_splits,
                      _window_left(window), float(softcap or 0.0))
    try:
        key = signature(*args)
    except TypeError:                                 # a list for window: valid, but not a dict key
        return plan
    return cache_plan(_PLANS, key, plan, MAX_PLANS)


@torch.library.custom_op("fa2::decode", mutates_args=())
def _decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               cache_seqlens: Optional[torch.Tensor], block_table: Optional[torch.Tensor], scale: float,
               num_splits: int, window_left: int, softcap: float) -> tuple[torch.Tensor, torch.Tensor]:
    window = None if window_left < 0 else (window_left, -1)
    plan = _plan(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits or None, window, softcap)
    return plan(q, k_cache, v_cache, cache_seqlens, block_table)


@_decode_op.register_fake
def _(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window_left, softcap):
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32)


def decode(q, k_cache, v_cache, cache_seqlens=None, block_table=None, scale=None, num_splits=None,
           return_lse=False, window=None, softcap=None):
    """Attention of a few new query tokens over a KV cache (Flash-Decoding); causal inside the query block."""
    if torch.compiler.is_compiling():                 # torch.compile sees the custom op
        _check_inputs(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window, softcap)
        o, lse = _decode_op(q, k_cache, v_cache, cache_seqlens, block_table, validate.softmax_scale(q.shape[-1], scale),
                            num_splits or 0, _window_left(window), float(softcap or 0.0))
    else:
        plan = _plan(q, k_cache, v_cache, cache_seqlens, block_table, scale, num_splits, window, softcap)
        o, lse = plan(q, k_cache, v_cache, cache_seqlens, block_table)
    return (o, lse) if return_lse else o
