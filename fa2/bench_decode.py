"""Decode benchmark: `fa2.decode` against SDPA's FLASH and cuDNN backends and a copy of the same bytes.

    python -m fa2.bench --sweep decode --out DIR [--quick]   # the GPU run: writes DIR/decode.{csv,png}
    from fa2.bench_decode import run_sweep         # what `python -m fa2.bench --sweep decode` calls

The family (issue 12): bf16, Hq = 32, Hkv = 8, D = 128, one query token, B ∈ {1, 8, 32}, cache length
N ∈ {1k, 4k, 8k, 32k, 128k}, contiguous (B, Hkv, N, D) caches and paged ones (pages of 16 and of 256 keys,
in random order). Every cache is full (cache_seqlens = N), so every provider reads the same bytes.

Decode is memory-bound, so every provider is reported as GB/s of K and V bytes read (2·B·Hkv·N·D·2 for
bf16) per second of its GPU time. The ceiling is a device-to-device copy of the caches (the faster of
cudaMemcpy and an elementwise kernel), whose GB/s counts the bytes read and the bytes written: the DRAM
throughput of a plain streaming kernel.

Columns: ``gpu_us`` GPU time per call -- CUDA events around replays of a CUDA graph that calls the provider
once on each of several independent input sets (together over twice the L2 cache, so every call reads
DRAM; no host time); ``gpu_us_l2`` the same with a single input set (warm L2 where the caches fit);
``host_us`` host time to issue one eager call (a loop of calls without synchronisation); ``timer`` says
how gpu_us was taken ("eager": the provider could not be captured in a graph, do_bench median instead;
"wall": the CPU). A shape's providers are timed in ``rounds`` interleaved rounds (``--rounds``, default 3 for
this sweep; each round starts one provider later, ``gpu_us`` is the median, ``round_us`` every round's), since on
a power-bound GPU the first kernel timed after an idle spell runs on the coolest chip (chapter 11, §11.1); the
tuning candidates (``fa2_tune``) are timed once. Before it is timed, each output is compared with an fp64 reference:
``rel_err`` = max|o - ref| / max|ref| with full caches, ``rel_err_ragged`` (fa2 only) with random lengths
and NaN written past them; NaN or more than MAX_REL_ERR gives check=fail.

Peers: ``sdpa_flash`` (SDPA's FLASH backend, the FA2 kernels vendored in PyTorch) and ``sdpa_cudnn`` on the
contiguous caches with ``enable_gqa=True``, and ``flash_attn`` (``flash_attn_with_kvcache``) when
importable. A peer that refuses a shape gets a row with its error. ``fa2_fused`` is fa2.decode's launch with
the fused combine (chapter 9, section 9.11: one launch instead of two when there are splits; off in fa2.decode:
on the H200 it was 2.0-2.4 us slower at B=1, book/results/decode_fused.csv), timed beside ``fa2`` in
the same run; it gets the ragged check too and stays out of the plot. ``fa2_pdl`` and ``fa2_nopdl`` likewise:
fa2.decode's launch with Programmatic Dependent Launch always on and always off (config "pdl" True / False; the
default, "auto", launches with PDL only when the plan has at least 8 splits; sm_90+ only, elsewhere the same launch as
``fa2``).
``fa2_tune`` rows time fa2.decode's
launch with other split counts and tile configs (contiguous caches) and other configs (paged caches): the
split heuristic, ``fa2.decode.GPU_CONFIG`` and ``PAGED_EXTRA_STAGES`` are chosen from them.
"""

import csv
import math
import re
import statistics
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F
import triton
import triton.testing

import fa2
from fa2 import runtime
from fa2.bench import error_text, flash_attn_version, interleaved_rounds, truncated
from fa2.chapters.decode_reference import decode_reference, poison_past, random_cache
from fa2.chapters.flash_decoding import cache_geometry, decode_tiles, num_splits_heuristic
from fa2.decoding import MAX_SPLITS, DecodePlan, sm_count
from fa2.decoding import _config as decode_config, plan_config
from fa2.testing import rel_err, rotation_size, time_ms

COLUMNS = ["sweep", "provider", "label", "layout", "B", "Hq", "Hkv", "N_Q", "N", "D", "dtype", "block_n",
           "num_warps", "num_stages", "num_splits", "gpu_us", "gpu_us_l2", "host_us", "gbs", "pct_of_copy",
           "rel_err", "rel_err_ragged", "check", "error", "timer", "rounds", "round_us", "device", "torch", "triton", "command"]
INT_COLUMNS = ("B", "Hq", "Hkv", "N_Q", "N", "D")
MAX_REL_ERR = 2e-2
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
TIMED_MS = 40.0               # each GPU-time measurement replays its graph for about this long
SPLIT_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128)
CONFIG_CANDIDATES = [dict(block_n=bn, num_warps=w, num_stages=s)
                     for bn, w, s in ((32, 4, 3), (64, 4, 2), (64, 4, 3), (64, 4, 4), (128, 4, 2), (128, 4, 3),
                                      (128, 8, 3))]
PAGED_CONFIG_CANDIDATES = [dict(block_n=bn, num_warps=w, num_stages=s)      # the block-table load takes stages
                           for bn, w, s in ((64, 4, 3), (64, 4, 4), (64, 4, 5), (64, 4, 6), (64, 8, 5), (128, 4, 5))]


@dataclass(frozen=True)
class DecodeShape:
    """One decode problem: q (B, Hq, N_Q, D) over caches of N keys per row, contiguous or paged."""
    B: int
    N: int
    page_size: int = 0            # 0: contiguous (B, Hkv, N, D) caches
    Hq: int = 32
    Hkv: int = 8
    D: int = 128
    N_Q: int = 1
    dtype: str = "bf16"

    @property
    def layout(self):
        return "contiguous" if self.page_size == 0 else f"paged{self.page_size}"

    def kv_bytes(self):
        """Bytes of K and V that one decode reads: 2 · B · Hkv · N · D · itemsize."""
        return 2 * self.B * self.Hkv * self.N * self.D * DTYPES[self.dtype].itemsize

    def name(self):
        return f"B={self.B} N={self.N} {self.layout}"


def family(quick=False):
    """The issue's family: B × N × (contiguous, paged 16, paged 256); quick: B ∈ {1, 32}, N ∈ {1k, 8k, 128k}."""
    batches, lengths = ((1, 32), (1024, 8192, 131072)) if quick else ((1, 8, 32), (1024, 4096, 8192, 32768, 131072))
    return [DecodeShape(B, N, page) for B in batches for N in lengths for page in (0, 16, 256)]


def tiny():
    """CPU-sized shapes for the Triton interpreter."""
    return [DecodeShape(1, 48, 0, Hq=4, Hkv=2, D=32), DecodeShape(2, 40, 16, Hq=4, Hkv=1, D=32)]


@dataclass
class DecodeInputs:
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    block_table: Optional[torch.Tensor]
    cache_seqlens: torch.Tensor


def make_inputs(shape, generator):
    """Fresh q and full caches (NaN only in a paged cache's spare pages)."""
    dtype = DTYPES[shape.dtype]
    lengths = torch.full((shape.B,), shape.N, dtype=torch.int32, device=runtime.DEVICE)
    q = torch.randn(shape.B, shape.Hq, shape.N_Q, shape.D, device=runtime.DEVICE, generator=generator).to(dtype)
    k, v, table = random_cache(shape.B, shape.Hkv, shape.N, shape.D, dtype, lengths, shape.page_size or None,
                               generator=generator)
    return DecodeInputs(q, k, v, table, lengths)


def input_sets(shape, generator):
    """Independent input sets that together exceed twice the L2 cache (one on the CPU)."""
    return [make_inputs(shape, generator) for _ in range(rotation_size(shape.kv_bytes()))]


def reference(x, cache_seqlens=None):
    """The decode every output is compared with: fp64 (an fp32 reference on the H200 disagreed with every
    provider alike at 128k keys)."""
    lengths = x.cache_seqlens if cache_seqlens is None else cache_seqlens
    return decode_reference(x.q, x.k_cache, x.v_cache, lengths, x.block_table, dtype=torch.float64)[0]


def ragged_error(x, generator, fns=None):
    """fa2.decode's error with random lengths in [1, N] and NaN written past them (spoils x's caches); with fns
    ({name: fn(inputs) -> o}), each one's error on the same lengths and poison, by name."""
    B, capacity = x.q.shape[0], x.cache_seqlens.max().item()
    lengths = torch.randint(1, capacity + 1, (B,), device=runtime.DEVICE, generator=generator).to(torch.int32)
    for cache in (x.k_cache, x.v_cache):
        poison_past(cache, x.block_table, lengths)
    ragged, ref = DecodeInputs(x.q, x.k_cache, x.v_cache, x.block_table, lengths), reference(x, lengths)
    if fns is None:
        return rel_err(fa2.decode(x.q, x.k_cache, x.v_cache, lengths, x.block_table), ref)
    return {name: rel_err(fn(ragged), ref) for name, fn in fns.items()}


# -------------------------------------------------------------------------------------------- providers

@dataclass
class Provider:
    """build(shape, sets) -> fn(inputs) -> o (None for the copy); applies(shape): whether it runs there."""
    name: str
    label: str
    build: Callable
    applies: Callable = lambda shape: True
    config: Optional[dict] = None         # fa2 rows: the launch config and split count (None: heuristic)
    num_splits: Optional[int] = None


def build_fa2(shape, sets):
    """fa2.decode, the public entry point."""
    return lambda x: fa2.decode(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table)


def build_plan(config, num_splits):
    """fa2.decode's launch (a DecodePlan) with a given config and split count."""
    def build(shape, sets):
        x = sets[0]
        plan = DecodePlan(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table, 1 / math.sqrt(shape.D),
                          num_splits, -1, 0.0, config=config)
        return lambda x: plan(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table)[0]
    return build


def build_sdpa(backend):
    """SDPA pinned to one backend, on the contiguous (B, Hkv, N, D) caches with enable_gqa."""
    def build(shape, sets):
        from torch.nn.attention import sdpa_kernel

        def run(x):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(x.q, x.k_cache, x.v_cache,
                                                      enable_gqa=shape.Hq != shape.Hkv)
        return run
    return build


def build_flash_attn(shape, sets):
    """flash_attn_with_kvcache: q (B, N_Q, H, D); its (B, N, Hkv, D) caches, or the paged layout (ours)."""
    from flash_attn import flash_attn_with_kvcache
    if shape.page_size == 0:                  # its contiguous layout: a (B, N, Hkv, D) copy of each set
        caches = {id(x): (x.k_cache.transpose(1, 2).contiguous(), x.v_cache.transpose(1, 2).contiguous())
                  for x in sets}
    else:
        caches = {id(x): (x.k_cache, x.v_cache) for x in sets}

    def run(x):
        k, v = caches[id(x)]
        return flash_attn_with_kvcache(x.q.transpose(1, 2), k, v, cache_seqlens=x.cache_seqlens,
                                       block_table=x.block_table, causal=True).transpose(1, 2)
    return run


def build_copy(shape, sets):
    """A device-to-device copy of the K and V caches: the bandwidth ceiling. Two ways of copying are timed and
    the faster is kept: ``copy_`` (a cudaMemcpy, which on the H200 ran at ~2.7 TB/s instead of ~4.2 for some
    caches of 0.5 GB and more -- the driver's choice of copy method, not the memory's limit) and an elementwise
    kernel on the SMs (``mul(x, 1)``, exact for every value)."""
    k_dst, v_dst = torch.empty_like(sets[0].k_cache), torch.empty_like(sets[0].v_cache)

    def memcpy(x):
        k_dst.copy_(x.k_cache)
        v_dst.copy_(x.v_cache)

    def kernel(x):
        torch.mul(x.k_cache, 1, out=k_dst)
        torch.mul(x.v_cache, 1, out=v_dst)
    if runtime.DEVICE != "cuda":
        return memcpy
    return min((memcpy, kernel), key=lambda fn: gpu_time_us(fn, sets)[0])


def providers():
    """The providers that can run here, by name: the copy and fa2 everywhere, the peers on a GPU."""
    contiguous = lambda shape: shape.page_size == 0
    found = [Provider("copy", "copy K+V (ceiling)", build_copy), Provider("fa2", "fa2.decode", build_fa2),
             Provider("fa2_fused", "fa2.decode, fused combine", build_plan(FUSED, None), config=FUSED),
             Provider("fa2_pdl", "fa2.decode, PDL launches", build_plan(PDL, None), config=PDL),
             Provider("fa2_nopdl", "fa2.decode, no PDL", build_plan(NO_PDL, None), config=NO_PDL)]
    if runtime.DEVICE == "cuda":
        from torch.nn.attention import SDPBackend
        found += [Provider("sdpa_flash", "SDPA FLASH (FA2, PyTorch-vendored)",
                           build_sdpa(SDPBackend.FLASH_ATTENTION), contiguous),
                  Provider("sdpa_cudnn", "SDPA cuDNN", build_sdpa(SDPBackend.CUDNN_ATTENTION), contiguous)]
        version = flash_attn_version()
        if version:
            found.append(Provider("flash_attn", f"flash_attn_with_kvcache {version}", build_flash_attn))
    return {p.name: p for p in found}


CTAS_PER_SM_CANDIDATES = (1, 2, 3, 4)
FUSED = dict(fused_combine=True)          # the fa2_fused provider's plan config
PDL = dict(pdl=True)                      # the fa2_pdl provider's plan config
NO_PDL = dict(pdl=False)                  # the fa2_nopdl provider's
VARIANTS = ("fa2_fused", "fa2_pdl", "fa2_nopdl")   # fa2.decode's launch, variants: checked like fa2, not plotted


def heuristic_picks(x):
    """{programs resident per SM: the split count the heuristic picks for x with that many} on this GPU."""
    _, m_tiles, n_tiles = decode_tiles(x.q, x.k_cache, x.block_table, decode_config(x.q)["block_n"])
    programs = x.q.shape[0] * cache_geometry(x.k_cache, x.block_table)[0] * m_tiles
    sms = sm_count(x.q.device)
    return {c: num_splits_heuristic(programs, n_tiles, sms * c, MAX_SPLITS) for c in CTAS_PER_SM_CANDIDATES}


def tuning_providers(quick=False, extra_splits=()):
    """fa2_tune: every split count (and extra_splits) with fa2's config, then every config at the heuristic's
    split count (contiguous caches); the paged configs at the heuristic's split count (paged caches)."""
    splits = sorted(set(SPLIT_CANDIDATES[::2] if quick else SPLIT_CANDIDATES) | set(extra_splits))
    configs = CONFIG_CANDIDATES[1::2] if quick else CONFIG_CANDIDATES
    paged_configs = PAGED_CONFIG_CANDIDATES[1::2] if quick else PAGED_CONFIG_CANDIDATES
    contiguous, paged = (lambda shape: shape.page_size == 0), (lambda shape: shape.page_size > 0)
    label = lambda c: "fa2 launch, config " + "/".join(map(str, c.values()))
    return ([Provider("fa2_tune", f"fa2 launch, {s} splits", build_plan(None, s), contiguous, None, s)
             for s in splits]
            + [Provider("fa2_tune", label(c), build_plan(c, None), contiguous, c, None) for c in configs]
            + [Provider("fa2_tune", label(c), build_plan(c, None), paged, c, None) for c in paged_configs])


# ----------------------------------------------------------------------------------------- measuring

def gpu_time_us(fn, sets):
    """(µs per call, timer): GPU time from a CUDA graph of calls rotating over the sets (fa2.testing.time_ms);
    eager calls (host time included) for a provider that cannot be captured; wall clock on the CPU."""
    inputs = [(x,) for x in sets]
    if runtime.DEVICE != "cuda":
        return 1e3 * time_ms(fn, inputs, warmup_ms=10, rep_ms=TIMED_MS), "wall"
    try:
        return 1e3 * time_ms(fn, inputs, rep_ms=TIMED_MS, cuda_graph=True), "cuda_graph"
    except Exception:                         # the provider cannot be captured: time eager calls
        torch.cuda.synchronize()
        return 1e3 * time_ms(fn, inputs), "eager"


def host_time_us(fn, x, gpu_us):
    """Host µs to issue one eager call: a loop of calls, no synchronisation inside (the GPU queue absorbs them)."""
    calls = max(10, min(200, int(20e3 / max(gpu_us, 1.0))))   # at most ~20 ms of GPU work queued
    if runtime.DEVICE != "cuda":
        calls = 1                             # the interpreter (tests only): nothing queues, one call shows the path
    fn(x)
    synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    elapsed = time.perf_counter() - start
    synchronize()
    return elapsed / calls * 1e6


def synchronize():
    if runtime.DEVICE == "cuda":
        torch.cuda.synchronize()


def launch_columns(provider, x):
    """block_n, num_warps, num_stages, num_splits of an fa2 row (what fa2.decode or the tuning row uses)."""
    cfg, splits = plan_config(x.q, x.k_cache, x.block_table, provider.num_splits, provider.config,
                              x.cache_seqlens is not None)
    return {"block_n": cfg["block_n"], "num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"],
            "num_splits": splits}


def prepare(provider, shape, sets, ref):
    """(row, fn): the provider's CSV row with its output checked against ref, and the function to time (None
    where building or running it failed: the error column says why)."""
    row = {"provider": provider.name, "label": provider.label, "check": "error", "error": ""}
    try:
        if provider.name.startswith("fa2"):
            row.update(launch_columns(provider, sets[0]))
        fn = provider.build(shape, sets)
        out = fn(sets[0])
        if out is None:                                  # the copy
            row["check"] = "n/a"
        else:
            err = rel_err(out, ref)
            row["rel_err"] = f"{err:.2e}"
            row["check"] = "ok" if err <= MAX_REL_ERR else "fail"      # NaN fails too
        del out
        return row, fn
    except Exception as error:                           # refused shape, OOM: record, go on
        row["error"] = error_text(error)
        synchronize()
        return row, None


def time_rows(prepared, shape, sets, rounds=1, full=True):
    """Time the prepared [(row, fn)] in `rounds` interleaved rounds: each fn's GPU time (gpu_time_us) once per
    round in fa2.bench.interleaved_rounds' rotated order, the median kept as gpu_us and every round's in round_us.
    Then, once each: GB/s, and with full the L2-resident time and the host time per eager call (full=False,
    tuning rows: GPU time only). A capture failure or OOM fills the error column."""
    def timer(fn):
        def gpu_time():
            try:
                return gpu_time_us(fn, sets)
            except Exception:
                synchronize()
                raise
        return gpu_time

    live = [(row, fn) for row, fn in prepared if fn is not None]
    results, errors = interleaved_rounds([timer(fn) for _, fn in live], rounds)
    for (row, fn), found, error in zip(live, results, errors):
        if error:
            row["error"] = error
            continue
        if not found:
            continue
        times, row["timer"] = [us for us, _ in found], found[-1][1]
        try:
            gpu_us = statistics.median(times)
            row.update(gpu_us=f"{gpu_us:.4g}", rounds=len(times), round_us=" ".join(f"{t:.4g}" for t in times))
            if full:
                row["gpu_us_l2"] = f"{gpu_time_us(fn, sets[:1])[0]:.4g}" if len(sets) > 1 else row["gpu_us"]
                row["host_us"] = f"{host_time_us(fn, sets[0], gpu_us):.4g}"
            if row["provider"] == "copy":                # bytes read + bytes written
                moved = 2 * sum(t.numel() * t.element_size() for t in (sets[0].k_cache, sets[0].v_cache))
                row["gbs"] = f"{moved / (gpu_us * 1e-6) / 1e9:.5g}"
            else:
                row["gbs"] = f"{shape.kv_bytes() / (gpu_us * 1e-6) / 1e9:.5g}"
        except Exception as error:
            row["error"] = error_text(error)
            synchronize()
    return [row for row, _ in prepared]


def measure(provider, shape, sets, ref, full=True):
    """One CSV row: check the provider's output against ref, then time it (one round); an error fills the error
    column. full=False (tuning rows): GPU time with rotation only."""
    return time_rows([prepare(provider, shape, sets, ref)], shape, sets, 1, full)[0]


def shape_columns(sweep, shape, environment):
    return {"sweep": sweep, "layout": shape.layout, "B": shape.B, "Hq": shape.Hq, "Hkv": shape.Hkv,
            "N_Q": shape.N_Q, "N": shape.N, "D": shape.D, "dtype": shape.dtype, **environment}


def device_name():
    if runtime.DEVICE == "cuda":
        return torch.cuda.get_device_name(0)
    return "CPU (Triton interpreter)" if runtime.INTERPRET else "CPU"


def run_shapes(shapes, names, write, sweep="decode", tune=True, quick=False, command="", rounds=1):
    """Measure every (shape, provider), pass each row to write as soon as it exists; the named providers of a
    shape are timed in `rounds` interleaved rounds (time_rows), the tuning candidates in one. Returns the rows
    and the heuristic's split count per (B, N) for each count of programs per SM (see heuristic_picks)."""
    environment = {"device": device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "command": command}
    every = providers()
    chosen = [every[n] for n in names if n in every]
    rows, picks = [], {}
    for shape in shapes:
        started = time.perf_counter()
        generator = torch.Generator(runtime.DEVICE).manual_seed(0)
        try:
            sets = input_sets(shape, generator)
        except torch.cuda.OutOfMemoryError as error:
            print(f"{shape.name()}: skipped ({str(error).splitlines()[0][:60]})")
            synchronize()
            continue
        ref = reference(sets[0])
        picks[(shape.B, shape.N)] = heuristic_picks(sets[0])
        tuning = tuning_providers(quick, picks[(shape.B, shape.N)].values()) if tune else []
        prepared = [prepare(provider, shape, sets, ref) for provider in chosen if provider.applies(shape)]
        measured = time_rows(prepared, shape, sets, rounds)
        measured += [measure(provider, shape, sets, ref, full=False) for provider in tuning
                     if provider.applies(shape)]
        shape_rows = [{**shape_columns(sweep, shape, environment), **row} for row in measured]
        ragged = {r["provider"]: r for r in shape_rows
                  if r["provider"] in ("fa2", *VARIANTS) and r["check"] != "error"}
        if ragged:                                       # last: it writes NaN into the first set's caches
            fns = {name: every[name].build(shape, sets) for name in ragged}
            for name, err in ragged_error(sets[0], generator, fns).items():
                ragged[name]["rel_err_ragged"] = f"{err:.2e}"
                if not err <= MAX_REL_ERR:
                    ragged[name]["check"] = "fail"
        copy = next((r for r in shape_rows if r["provider"] == "copy" and r["gbs"]), None)
        for row in shape_rows:
            if copy and row["provider"] != "copy" and row.get("gbs"):
                row["pct_of_copy"] = f"{100 * float(row['gbs']) / float(copy['gbs']):.1f}"
            write(row)
        rows += shape_rows
        print(f"{shape.name():28s} {len(sets):2d} input sets, {time.perf_counter() - started:5.1f} s", flush=True)
        del sets, ref
        if runtime.DEVICE == "cuda":
            torch.cuda.empty_cache()
    return rows, picks


def run_sweep(out_dir, quick=False, tune=True, shapes=None, names=None, command="", plot_png=True, rounds=1):
    """Check and time the family (or shapes), each shape's providers in `rounds` interleaved rounds, write
    out_dir/decode.csv (and .png), print the summary. Returns the rows."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    shapes = family(quick) if shapes is None else shapes
    names = list(providers()) if names is None else names
    csv_path = out_dir / "decode.csv"
    print(f"{runtime.describe()}\n{len(shapes)} shapes, providers {', '.join(names)}"
          f"{' + fa2_tune' if tune else ''} -> {csv_path}", flush=True)
    with open(csv_path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS, restval="")
        writer.writeheader()

        def write(row):
            writer.writerow(row)
            file.flush()

        rows, picks = run_shapes(shapes, names, write, tune=tune, quick=quick, command=command, rounds=rounds)
    print_summary(rows, picks)
    print(f"wrote {csv_path}")
    if plot_png:
        try:
            plot(rows, out_dir / "decode.png")
            print(f"wrote {out_dir / 'decode.png'}")
        except ImportError as error:
            print(f"no plot: {error}")
    return rows


# ------------------------------------------------------------------------------------------- reporting

def read_rows(path):
    """The rows of a decode CSV, integer columns as ints."""
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        row.update({c: int(row[c]) for c in INT_COLUMNS})
    return rows


def _us(row):
    return float(row["gpu_us"]) if row and row.get("gpu_us") and row["check"] in ("ok", "n/a") else None


NOTE_WIDTH = 100             # the summary's lines fit the book's code cells (chapter 9 prints it)
VARIANT_COLUMNS = [("fa2_fused", "fused us", "the fused combine"), ("fa2_pdl", "pdl us", "PDL always"),
                   ("fa2_nopdl", "no-pdl us", "PDL never")]
PEER_COLUMNS = {"sdpa_flash": "FLASH us", "sdpa_cudnn": "cuDNN us", "flash_attn": "flash_attn us"}


def print_summary(rows, picks=None):
    """Per (B, N): fa2's µs, GB/s and % of the copy; paged/contiguous; the peers; then the goals and tuning."""
    table = {}
    for row in rows:
        table.setdefault((row["B"], row["N"]), {}).setdefault(row["layout"], {}).setdefault(row["provider"], []) \
            .append(row)
    peers = [p for p in ("sdpa_flash", "sdpa_cudnn", "flash_attn") if any(r["provider"] == p for r in rows)]
    variants = [(name, column, what) for name, column, what in VARIANT_COLUMNS
                if any(r["provider"] == name for r in rows)]
    header = ["B", "N", "fa2 us", *[column for _, column, _ in variants], "GB/s", "%copy", "host us", "paged16",
              "paged256", *[PEER_COLUMNS[p] for p in peers], "peer/fa2"]
    lines, goals = [], []
    for (B, N), layouts in table.items():
        one = lambda layout, name: (layouts.get(layout, {}).get(name) or [None])[0]
        fa2_row = one("contiguous", "fa2")
        fa2_us = _us(fa2_row)
        cells = [str(B), str(N), f"{fa2_us:.1f}" if fa2_us else "err"]
        for name, _, what in variants:
            variant_us = _us(one("contiguous", name))
            cells.append(f"{variant_us:.1f}" if variant_us else "err")
            if variant_us and B == 1 and N == 8192:
                goals.append((f"B=1 N=8k in <= 15 us GPU time with {what} ({variant_us:.1f} us)", "",
                              variant_us <= 15))
        cells += [fa2_row["gbs"] if fa2_us else "-", fa2_row.get("pct_of_copy", "-") if fa2_us else "-",
                 fa2_row.get("host_us", "-") if fa2_row else "-"]
        for layout in ("paged16", "paged256"):
            paged = _us(one(layout, "fa2"))
            cells.append(f"{truncated(paged / fa2_us)}x" if paged and fa2_us else "-")
            if paged and fa2_us:
                goals.append(("paged within 10% of contiguous", f"B={B} N={N} {layout} ({truncated(paged / fa2_us)}x)",
                              paged <= 1.10 * fa2_us))
        peer_us = {p: _us(one("contiguous", p)) for p in peers}
        cells += [f"{peer_us[p]:.1f}" if peer_us[p] else "err" for p in peers]
        measured = [u for u in peer_us.values() if u]
        cells.append(f"{truncated(min(measured) / fa2_us)}x" if measured and fa2_us else "-")
        if measured and fa2_us:
            goals.append(("faster than every peer", f"B={B} N={N} ({truncated(min(measured) / fa2_us)}x)",
                          fa2_us < min(measured)))
        if fa2_us and B == 1 and N == 131072 and fa2_row.get("pct_of_copy"):
            goals.append((f"B=1 N=128k at >= 85% of the copy ({fa2_row['pct_of_copy']}%)", "",
                          float(fa2_row["pct_of_copy"]) >= 85))
        if fa2_us and B == 1 and N == 8192:
            goals.append((f"B=1 N=8k in <= 15 us GPU time ({fa2_us:.1f} us)", "", fa2_us <= 15))
        lines.append(cells)
    widths = [max(len(c) for c in column) for column in zip(header, *lines)]
    gap = "  " if sum(widths) + 2 * (len(widths) - 1) <= NOTE_WIDTH else " "
    print("\nfa2.decode, contiguous caches: GPU us per call (fa2 and each peer); paged columns:\n"
          "paged time / contiguous time; peer/fa2: the fastest peer's time / fa2's"
          + "".join(f"\n{column}: fa2.decode's launch with {what} ({name})" for name, column, what in variants))
    for cells in [header, *lines]:
        print(gap.join(c.rjust(w) for c, w in zip(cells, widths)))
    print_goals(goals)
    print_tuning(rows, picks)
    for row in rows:
        if row["check"] == "fail":
            _print_wrapped(f"CHECK FAILED: {row['provider']} {row['label']} B={row['B']} N={row['N']} "
                           f"{row['layout']}: rel_err {row['rel_err']} ragged {row.get('rel_err_ragged', '')}")
    for provider, error in sorted({(r["provider"], r["error"]) for r in rows if r["error"]}):
        _print_wrapped(f"error ({provider}): {error}")
    if any(r["provider"] == "sdpa_flash" for r in rows) and not any(r["provider"] == "flash_attn" for r in rows):
        _print_wrapped("note: flash_attn is not installed; 'SDPA FLASH' runs the FA2 kernels vendored in "
                       "PyTorch (on an H200, in a separate run, flash-attn 2.8.3 ran 0.99-1.14x its prefill "
                       "speed, geometric mean 1.055x)")


def print_goals(goals):
    """One line per goal: [(goal, where, met)] grouped by goal; a goal checked at several places prints how many
    it met and names the places it missed."""
    for goal in dict.fromkeys(g for g, _, _ in goals):
        checks = [(where, met) for g, where, met in goals if g == goal]
        missed = [where for where, met in checks if not met]
        counts = f": {len(checks) - len(missed)} of {len(checks)}" if len(checks) > 1 or checks[0][0] else ""
        _print_wrapped(f"{'MISS' if missed else 'MET '} {goal}{counts}"
                       + (f"; missed at {', '.join(missed)}" if missed and counts else ""))


def _print_wrapped(text):
    """Print text in lines of at most NOTE_WIDTH columns (the book shows 100), continuation indented."""
    print(textwrap.fill(text, NOTE_WIDTH, subsequent_indent="    ", break_long_words=True))


def print_tuning(rows, picks=None):
    """For each shape and layout: fa2's launch and the fastest fa2_tune row, and how much slower fa2's is; with
    picks, how close the heuristic's split count comes to the best, for each count of programs per SM."""
    groups = {}
    for row in rows:
        if row["provider"] in ("fa2", "fa2_tune") and _us(row):
            groups.setdefault((row["B"], row["N"], row["layout"]), []).append(row)
    if not any(r["provider"] == "fa2_tune" for group in groups.values() for r in group):
        return
    print("\ntuning: fa2.decode's launch vs the fastest candidate (fa2_tune rows)")
    describe = lambda r: f"bn={r['block_n']} w={r['num_warps']} st={r['num_stages']} splits={r['num_splits']}"
    for (B, N, layout), group in groups.items():
        chosen = next((r for r in group if r["provider"] == "fa2"), None)
        best = min(group, key=_us)
        if chosen:
            print(f"B={B:<3d} N={N:<7d} {layout:10s} fa2  {_us(chosen):8.1f} us ({describe(chosen)})  "
                  f"fa2/best {_us(chosen) / _us(best):.2f}")
            print(f"{'':27s}best {_us(best):8.1f} us ({describe(best)})")
    if not picks:
        return
    print("\nsplit heuristic (fa2's config, contiguous): time at its pick / best time,\n"
          "per programs-per-SM count")
    for c in CTAS_PER_SM_CANDIDATES:
        ratios = []
        for (B, N, layout), group in groups.items():
            by_splits = {int(r["num_splits"]): _us(r) for r in group
                         if re.fullmatch(r"fa2 launch, \d+ splits", r["label"])}
            pick = picks.get((B, N), {}).get(c)
            if layout == "contiguous" and pick in by_splits:
                ratios.append(by_splits[pick] / min(_us(r) for r in group))
        if ratios:
            geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            print(f"  {c} per SM: geometric mean {geomean:.3f}, worst {max(ratios):.3f} over {len(ratios)} shapes")


PROVIDER_STYLE = {"fa2": ("#d62728", "-"), "sdpa_flash": ("#1f77b4", "-"), "sdpa_cudnn": ("#2ca02c", "-"),
                  "flash_attn": ("#17becf", "-")}
LAYOUT_STYLE = {"contiguous": "-", "paged16": "--", "paged256": ":"}


def plot(rows, path=None):
    """GB/s of K+V read vs cache length, one panel per batch size, the copy's GB/s as the ceiling.
    Saved to path (and closed) when given; the figure is returned."""
    import matplotlib.pyplot as plt

    batches = sorted({r["B"] for r in rows})
    fig, axes = plt.subplots(1, len(batches), figsize=(5.2 * len(batches), 4.4), squeeze=False, sharey=True)
    for ax, B in zip(axes[0], batches):
        lines, labels = {}, {}
        for row in rows:
            if (row["B"] == B and row["provider"] not in ("fa2_tune", *VARIANTS) and row.get("gbs")
                    and row["check"] in ("ok", "n/a")):
                if row["provider"] == "copy" and row["layout"] != "contiguous":
                    continue
                lines.setdefault((row["provider"], row["layout"]), []).append((row["N"], float(row["gbs"])))
                labels[row["provider"]] = row.get("label") or row["provider"]
        for (provider, layout), points in sorted(lines.items()):
            points.sort()
            label = "copy K+V (read + write)" if provider == "copy" else labels[provider]
            if provider == "fa2":
                label = f"{label}, {layout}"
            if provider == "copy":
                ax.plot(*zip(*points), "k--", marker=".", lw=1.5, label=label)
            else:
                color, _ = PROVIDER_STYLE.get(provider, ("#7f7f7f", "-"))
                ax.plot(*zip(*points), color=color, ls=LAYOUT_STYLE[layout], marker="o", ms=4, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("cache length N (keys)")
        ax.set_title(f"B = {B}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("GB/s of K + V read")
    handles = {}
    for ax in axes[0]:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    first = rows[0]
    fig.suptitle(f"Decode, {first['dtype']}, Hq={first['Hq']}, Hkv={first['Hkv']}, D={first['D']} "
                 f"on {first['device']}")
    fig.tight_layout(rect=(0, 0, 1, 0.86))
    fig.legend(handles.values(), handles.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.93),
               ncol=min(len(handles), 4), frameon=False)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
    return fig
