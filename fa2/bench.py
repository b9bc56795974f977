"""Benchmark CLI: times ``fa2.attention`` against its peers in one process, checks every output first.

    python -m fa2.bench --sweep money                       # (8, 32, 2048, 128) bf16 causal, every peer
    python -m fa2.bench --sweep reference --no-plot         # the book's full sweep (96 shapes)
    python -m fa2.bench --sweep headline --providers fa2,sdpa_flash --gqa 8
    python -m fa2.bench --sweep headdim                     # D = 64, 80, 96, 128, 160, 192, 256
    python -m fa2.bench --sweep decode                      # fa2.decode: GB/s against its peers and a copy
    python -m fa2.bench --sweep varlen                      # packed variable-length batch (fa2/bench_dropin.py)
    python -m fa2.bench --sweep window                      # sliding window at N = 32k (fa2/bench_dropin.py)
    python -m fa2.bench --sweep tiny                        # CPU: Triton interpreter vs SDPA's math backend

Providers: ``fa2`` (``fa2.attention``), ``fa2_ch6`` (``fa2.attention``'s plan with chapter 12's Gluon dispatch off:
chapter 6's kernel), ``fa2@v0`` ... ``fa2@v5`` (chapter 6's ladder, ``fa2.ladder``), ``sdpa_flash`` (SDPA's FLASH backend: the FA2 kernels vendored in
PyTorch), ``sdpa_cudnn``, ``sdpa_efficient``, ``sdpa_math``, ``flash_attn`` (``flash_attn_func`` on
(B, N, H, D) inputs, when importable) and ``flex`` (``torch.compile(flex_attention)``, CUDA only). The default
is every provider that can run here: on the CPU only ``fa2`` and ``sdpa_math``.

For every shape each provider's output is first compared with a reference (SDPA's FLASH backend on a GPU,
fp64 on the CPU; so on a GPU ``sdpa_flash``'s own error is 0 by construction): ``rel_err`` =
max|o - ref| / max|ref|; NaN or more than 2e-2 gives ``check=fail`` (the row is still timed). Then
``fa2.testing.time_ms`` times it (``do_bench``'s median) while the calls rotate over independently
allocated input sets that together exceed twice the L2 cache. A provider that raises for a shape gets a
row with ``check=error`` and the message in ``error``; the sweep goes on.

A GPU sweep refuses to start on a CPU (the interpreter would take hours); the CPU runs ``--sweep tiny``.
Writes ``<out>/<name>.csv`` (default ``./bench-results/``; the book's committed numbers are written by naming
``--out book/results``) (one row per shape and provider, with the command that made it) and
``<out>/<name>.png``, and prints one row per shape with TFLOP/s and fa2's ratio to each peer. Exits 1 when
an output failed its check or ``fa2`` raised, else 0.
"""

import argparse
import contextlib
import csv
import itertools
import math
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
import triton
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel
from tqdm import tqdm

import fa2
from fa2 import ladder, runtime
from fa2._triton_compat import raise_recompile_limit
from fa2.chapters.reference import attention_reference
from fa2.testing import attention_tflops, make_qkv, rel_err, rotation_size, time_ms

COLUMNS = ["sweep", "provider", "label", "B", "H", "Hkv", "N_Q", "N_KV", "D", "dtype", "causal", "ms", "tflops",
           "rel_err", "check", "error", "rounds", "round_ms", "device", "torch", "triton", "command"]
# Sweeps timed in interleaved rounds unless --rounds says otherwise: every provider of a shape once per round, the
# order rotated each round, "ms" the median (chapter 11, §11.1: on a power-bound GPU the first kernel timed after
# an idle spell runs on the coolest chip, which favoured whichever provider came first by 7-12 % at the headline
# shape, book/results/money_order.md).
SWEEP_ROUNDS = {"money": 5, "headline": 3, "varlen": 3, "window": 3, "decode": 3}


def sweep_rounds(sweep, rounds=None):
    """The rounds a sweep is timed in: `rounds` (--rounds) if given, else SWEEP_ROUNDS's, else 1."""
    return rounds or SWEEP_ROUNDS.get(sweep, 1)
MAX_REL_ERR = 2e-2                    # above this (or NaN) a provider's output is marked check=fail
MAX_SHAPE_BYTES = 40 * 2**30          # sweeps skip shapes whose q + k + v + o exceed this
RATIO_PEERS = ("sdpa_flash", "flash_attn", "sdpa_cudnn", "sdpa_math")   # table columns fa2/<peer>, in order
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Shape:
    """One benchmark problem: q (B, H, N, D), k and v (B, Hkv, N, D); N_Q = N_KV = N."""
    B: int
    H: int
    Hkv: int
    N: int
    D: int
    causal: bool
    dtype: str                        # "fp16" or "bf16"

    def nbytes(self, with_output=True):
        """Bytes of q + k + v (+ o)."""
        elems = (self.H * (2 if with_output else 1) + 2 * self.Hkv) * self.B * self.N * self.D
        return elems * DTYPES[self.dtype].itemsize

    def tflops(self, ms):
        """TFLOP/s at ms per call: 4·B·H·N²·D FLOPs, halved if causal."""
        return attention_tflops(self.B, self.H, self.N, self.N, self.D, self.causal, ms)

    def name(self):
        """Short text such as '8×32×2048×128' (heads as 'H/Hkv' under GQA)."""
        heads = self.H if self.H == self.Hkv else f"{self.H}/{self.Hkv}"
        return f"{self.B}×{heads}×{self.N}×{self.D}"


# ----------------------------------------------------------------------------------------------- sweeps

def grid_sweep(bnhd, causals=(True, False), dtypes=("fp16", "bf16"), hkv=None):
    """Shapes for every (B, N, H, D) × causal × dtype, dropping those above MAX_SHAPE_BYTES."""
    shapes = [Shape(B, H, hkv or H, N, D, causal, dtype)
              for dtype, (B, N, H, D), causal in itertools.product(dtypes, bnhd, causals)]
    return [s for s in shapes if s.nbytes() <= MAX_SHAPE_BYTES]


def reference_sweep(hkv=None):
    """The book's reference sweep: B∈{1,8,32} × N∈{512..16384} × D∈{64,128} × causal × dtype; H = 32 (D=128), 16 (D=64)."""
    bnhd = [(B, N, 32 if D == 128 else 16, D)
            for D in (128, 64) for B in (1, 8, 32) for N in (512, 2048, 8192, 16384)]
    return grid_sweep(bnhd, hkv=hkv)


def money_sweep(hkv=None):
    """The money shot: (B, H, N, D) = (8, 32, 2048, 128), bf16, causal."""
    return grid_sweep([(8, 2048, 32, 128)], causals=(True,), dtypes=("bf16",), hkv=hkv)


def headline_sweep(hkv=None):
    """A handful of shapes for a quick look, bf16, causal and not."""
    bnhd = [(8, 2048, 32, 128), (1, 8192, 32, 128), (32, 512, 32, 128), (8, 2048, 16, 64), (1, 16384, 16, 64)]
    return grid_sweep(bnhd, dtypes=("bf16",), hkv=hkv)


def headdim_sweep(hkv=None):
    """Every head dim models use, powers of two or not: (2, 32, 2048, D) and (1, 16, 8192, D), both dtypes."""
    bnhd = [(B, N, H, D) for D in (64, 80, 96, 128, 160, 192, 256) for B, N, H in ((2, 2048, 32), (1, 8192, 16))]
    return grid_sweep(bnhd, hkv=hkv)


def tiny_sweep(hkv=None):
    """CPU-sized shapes for the Triton interpreter (a few seconds in all)."""
    return grid_sweep([(1, 64, 2, 32), (1, 48, 2, 16)], hkv=hkv)


CPU_SWEEPS = ("tiny",)                # what the interpreter can run in seconds
DROPIN_SWEEPS = ("varlen", "window")  # fa2/bench_dropin.py: problems and peers of their own
SWEEPS = {"money": money_sweep, "reference": reference_sweep, "headline": headline_sweep, "headdim": headdim_sweep,
          "tiny": tiny_sweep}


# -------------------------------------------------------------------------------------------- providers

@dataclass
class Provider:
    """A peer: build(shape) -> fn(q, k, v) -> o, called inside context(); layout is how fn wants q, k, v."""
    name: str
    label: str
    build: Callable[[Shape], Callable]
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    layout: str = "bhnd"              # "bnhd": fn takes contiguous (B, N, H, D) q, k, v and returns o so


def build_fa2(shape):
    """fa2.attention, the package's public entry point."""
    attention = fa2.attention
    return lambda q, k, v: attention(q, k, v, causal=shape.causal)


def build_fa2_ch6(shape):
    """fa2.attention's plan made with the Gluon dispatch off (fa2.plan.chapter6_attention): chapter 6's kernel, to
    time beside fa2 where fa2/configs/<GPU>.gluon.json sends fa2.attention to chapter 12's Gluon kernel."""
    from fa2.plan import chapter6_attention
    return lambda q, k, v: chapter6_attention(q, k, v, shape.causal)[0]


def build_sdpa(shape):
    """F.scaled_dot_product_attention; the backend is chosen by the provider's context."""
    gqa = {"enable_gqa": True} if shape.Hkv != shape.H else {}
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal, **gqa)


def build_flash_attn(shape):
    """flash_attn.flash_attn_func on (B, N, H, D) inputs (GQA native)."""
    from flash_attn import flash_attn_func
    return lambda q, k, v: flash_attn_func(q, k, v, causal=shape.causal)


def build_version(name):
    """A rung of chapter 6's ladder (fa2.ladder), e.g. fa2@v3."""
    run = ladder.version(name).run
    return lambda shape: (lambda q, k, v: run(q, k, v, shape.causal)[0])


_compiled_flex = None


def build_flex(shape):
    """torch.compile(flex_attention), static shapes; the causal block mask is built here, once per shape."""
    global _compiled_flex
    if runtime.DEVICE != "cuda":
        raise RuntimeError("flex_attention is benchmarked on CUDA only")
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    if _compiled_flex is None:
        raise_recompile_limit()          # one compiled graph per shape
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    block_mask = None
    if shape.causal:
        block_mask = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, B=None, H=None,
                                       Q_LEN=shape.N, KV_LEN=shape.N, device="cuda")
    gqa = shape.Hkv != shape.H
    return lambda q, k, v: _compiled_flex(q, k, v, block_mask=block_mask, enable_gqa=gqa)


def sdpa_backend(backend):
    """A context factory pinning SDPA to one backend (it raises if that backend cannot run the inputs)."""
    return lambda: sdpa_kernel(backend)


def flash_attn_version():
    """flash_attn's version, or None when it is not importable."""
    try:
        import flash_attn
    except Exception:
        return None
    return getattr(flash_attn, "__version__", "?")


def all_providers():
    """Every provider by name, whether or not it can run here."""
    version = flash_attn_version()
    return {p.name: p for p in [
        Provider("fa2", "fa2 (Triton)", build_fa2),
        Provider("fa2_ch6", "fa2, chapter 6's kernel (no Gluon dispatch)", build_fa2_ch6),
        Provider("sdpa_flash", "FA2 (PyTorch-vendored)", build_sdpa, sdpa_backend(SDPBackend.FLASH_ATTENTION)),
        Provider("sdpa_cudnn", "SDPA cuDNN", build_sdpa, sdpa_backend(SDPBackend.CUDNN_ATTENTION)),
        Provider("sdpa_efficient", "SDPA mem-efficient", build_sdpa, sdpa_backend(SDPBackend.EFFICIENT_ATTENTION)),
        Provider("sdpa_math", "SDPA math", build_sdpa, sdpa_backend(SDPBackend.MATH)),
        Provider("flash_attn", f"flash-attn {version or '(not installed)'}", build_flash_attn, layout="bnhd"),
        Provider("flex", "FlexAttention (compiled)", build_flex),
        *[Provider(f"fa2@{v.name}", f"fa2 {v.name} ({v.adds})", build_version(v.name))
          for v in ladder.VERSIONS.values()],
    ]}


def default_providers():
    """Names of the providers that make sense here: fa2 and SDPA math on the CPU, every GPU peer on CUDA."""
    if runtime.DEVICE != "cuda":
        return ["fa2", "sdpa_math"]
    names = ["fa2", "sdpa_flash", "sdpa_cudnn", "sdpa_efficient"]
    return names + (["flash_attn"] if flash_attn_version() else []) + ["flex"]


# ----------------------------------------------------------------------------------------- measuring

def input_sets(shape, generator):
    """Independent (q, k, v) sets, fresh N(0, 1): enough that together they exceed 2× the L2 (1 on the CPU)."""
    count = rotation_size(shape.nbytes(with_output=False))
    return [make_qkv(shape.B, shape.H, shape.Hkv, shape.N, shape.N, shape.D, DTYPES[shape.dtype],
                     generator=generator) for _ in range(count)]


def reference_output(shape, q, k, v):
    """What every provider is checked against: fp64 on the CPU, SDPA's FLASH backend on a GPU; None if neither ran."""
    if runtime.DEVICE != "cuda":
        return attention_reference(q, k, v, causal=shape.causal)
    sdpa = build_sdpa(shape)
    for context in (sdpa_backend(SDPBackend.FLASH_ATTENTION), contextlib.nullcontext):
        try:                          # FLASH cannot run these inputs: let SDPA choose a backend
            with context():
                return sdpa(q, k, v)
        except RuntimeError:
            continue
    return None


def to_layout(sets, layout):
    """The input sets as the provider takes them: (B, H, N, D) views, or contiguous (B, N, H, D) copies."""
    if layout == "bhnd":
        return sets
    return [tuple(x.transpose(1, 2).contiguous() for x in qkv) for qkv in sets]


def error_text(error):
    """An exception as one line for a CSV's error column."""
    return f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]


def prepare(provider, shape, sets, ref, args):
    """(row, timer): the provider's output checked against ref into a CSV row without times, and timer() -> ms of
    one timing (None if the provider could not run: the error column says why)."""
    row = {"provider": provider.name, "label": provider.label, "ms": "", "tflops": "", "rel_err": "",
           "check": "error", "error": "", "rounds": "", "round_ms": ""}
    try:
        fn = provider.build(shape)
        inputs = to_layout(sets, provider.layout)
        with provider.context():
            o = fn(*inputs[0])
            o = o.transpose(1, 2) if provider.layout == "bnhd" else o
            err = rel_err(o, ref) if ref is not None else math.nan
            row["rel_err"] = f"{err:.2e}" if ref is not None else ""
            row["check"] = "unchecked" if ref is None else "ok" if err <= MAX_REL_ERR else "fail"   # NaN: fail
            del o
    except Exception as error:        # unsupported backend/dtype/shape, OOM, missing package: record, go on
        row["error"] = error_text(error)
        return row, None

    def timer():
        with provider.context():
            return time_ms(fn, inputs, args.warmup_ms, args.rep_ms)
    return row, timer


def interleaved_rounds(timers, rounds):
    """Call every timer once per round, round r starting at the r-th (the order rotated); a timer that raises
    drops out. Returns (results, errors): per timer its results in call order ([] if it raised) and its error
    text ("" if none). What fa2.bench, fa2.bench_dropin and fa2.bench_decode time their rounds with."""
    results, errors = [[] for _ in timers], [""] * len(timers)
    order = list(range(len(timers)))
    for r in range(rounds):
        for i in order[r % len(order):] + order[:r % len(order)] if order else []:
            if errors[i]:
                continue
            try:
                results[i].append(timers[i]())
            except Exception as error:
                errors[i], results[i] = error_text(error), []
    return results, errors


def time_in_rounds(prepared, rounds, tflops):
    """The rows of `prepared` [(row, timer)] (timer None: the provider could not run) with their times: every
    timer called once per round in interleaved_rounds' rotated order, the median kept as "ms" with TFLOP/s from
    tflops(ms), and every round's ms in "round_ms". A timer that raises drops out with its error.
    fa2.bench's --rounds, and fa2.bench_dropin's."""
    live = [(row, timer) for row, timer in prepared if timer is not None]
    results, errors = interleaved_rounds([timer for _, timer in live], rounds)
    for (row, _), found, error in zip(live, results, errors):
        if error:
            row["error"] = error
        elif found:
            ms = statistics.median(found)
            row.update(ms=f"{ms:.5g}", tflops=f"{tflops(ms):.5g}", rounds=len(found),
                       round_ms=" ".join(f"{t:.5g}" for t in found))
    return [row for row, _ in prepared]


def measure(provider, shape, sets, ref, args):
    """One CSV row: check provider's output against ref, then time it once (an error fills the error column)."""
    return time_in_rounds([prepare(provider, shape, sets, ref, args)], 1, shape.tflops)[0]


def measure_rounds(providers, shape, sets, ref, args, rounds):
    """The rows of every provider at one shape, each checked first, then timed in `rounds` interleaved rounds
    (time_in_rounds)."""
    return time_in_rounds([prepare(provider, shape, sets, ref, args) for provider in providers], rounds,
                          shape.tflops)


def shape_columns(sweep, shape, environment):
    """The CSV columns that describe the problem and the machine."""
    return {"sweep": sweep, "B": shape.B, "H": shape.H, "Hkv": shape.Hkv, "N_Q": shape.N, "N_KV": shape.N,
            "D": shape.D, "dtype": shape.dtype, "causal": shape.causal, **environment}


def device_name():
    """The GPU's name, or the CPU with the interpreter."""
    if runtime.DEVICE == "cuda":
        return torch.cuda.get_device_name(0)
    return "CPU (Triton interpreter)" if runtime.INTERPRET else "CPU"


def run_sweep(sweep, shapes, providers, args, write):
    """Measure every (shape, provider), passing each row to write as soon as it exists; returns the rows."""
    environment = {"device": device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "command": args.command}
    rows = []
    rounds = sweep_rounds(sweep, getattr(args, "rounds", None))
    progress = tqdm(total=len(shapes) * len(providers), unit="run", dynamic_ncols=True,
                    disable=None)          # None: only on a terminal (no bars in notebooks or logs)
    for shape in shapes:
        generator = torch.Generator(runtime.DEVICE).manual_seed(0)
        sets = input_sets(shape, generator)
        ref = reference_output(shape, *sets[0])
        if rounds > 1:
            measured = measure_rounds(providers, shape, sets, ref, args, rounds)
        else:
            measured = [measure(provider, shape, sets, ref, args) for provider in providers]
        for result in measured:
            progress.set_postfix_str(f"{shape.name()} {shape.dtype} causal={shape.causal} {result['provider']}")
            row = {**shape_columns(sweep, shape, environment), **result}
            write(row)
            rows.append(row)
            progress.update()
        del sets, ref
        if runtime.DEVICE == "cuda":
            torch.cuda.empty_cache()
    progress.close()
    return rows


# ------------------------------------------------------------------------------------------- reporting

def by_shape(rows):
    """Rows grouped as {shape key: {provider: row}}, in sweep order."""
    table = {}
    for row in rows:
        key = (row["B"], row["H"], row["Hkv"], row["N_Q"], row["D"], row["causal"], row["dtype"])
        table.setdefault(key, {})[row["provider"]] = row
    return table


def ratio(row, peer_row):
    """fa2's TFLOP/s over a peer's, or None unless both ran and passed the check."""
    if row["check"] != "ok" or peer_row["check"] != "ok" or float(peer_row["tflops"]) <= 0:
        return None
    return float(row["tflops"]) / float(peer_row["tflops"])


def truncated(x, decimals=3):
    """x cut (never rounded up) to `decimals` places: a ratio of 1.19996 prints as 1.199, not 1.200."""
    return f"{math.floor(x * 10**decimals) / 10**decimals:.{decimals}f}"


def summarize(rows, peer, threshold=1.2):
    """fa2's TFLOP/s ratio to `peer` over the shapes of a run: geometric mean, min, max, how many reach
    `threshold`, and the shapes below it (Shape, ratio), slowest first."""
    pairs = [(Shape(*key), ratio(row["fa2"], row[peer])) for key, row in by_shape(rows).items()
             if "fa2" in row and peer in row]
    pairs = [(shape, r) for shape, r in pairs if r is not None]
    if not pairs:
        return None
    values = [r for _, r in pairs]
    return dict(n=len(values), geomean=math.exp(sum(map(math.log, values)) / len(values)), min=min(values),
                max=max(values), at_least=sum(r >= threshold for r in values), threshold=threshold,
                below=sorted([(s, r) for s, r in pairs if r < threshold], key=lambda p: p[1]))


def tflops_cell(row):
    """A table cell: TFLOP/s, '!' appended when the output failed its check, '?' when unchecked, 'err' if it raised."""
    if row["check"] == "error":
        return "err"
    return f"{float(row['tflops']):.4g}" + {"fail": "!", "unchecked": "?"}.get(row["check"], "")


def print_table(rows, names):
    """One line per shape: each provider's TFLOP/s and fa2's ratio to each peer; then geomean and min."""
    peers = [p for p in RATIO_PEERS if p in names and "fa2" in names]
    header = ["shape", "causal", "dtype", *names, *[f"fa2/{p}" for p in peers]]
    lines, ratios = [], {p: [] for p in peers}
    for (B, H, Hkv, N, D, causal, dtype), row in by_shape(rows).items():
        shape = Shape(B, H, Hkv, N, D, causal, dtype)
        cells = [shape.name(), str(causal), dtype, *[tflops_cell(row[n]) for n in names]]
        for peer in peers:
            r = ratio(row["fa2"], row[peer])
            cells.append("-" if r is None else truncated(r))
            ratios[peer] += [] if r is None else [r]
        lines.append(cells)
    widths = [max(len(c) for c in column) for column in zip(header, *lines)]
    print("\nTFLOP/s (4·B·H·N²·D, halved if causal; '!' = output failed its check, '?' = no reference, "
          "'err' = raised)")
    for cells in [header, *lines]:
        print("  ".join(c.rjust(w) for c, w in zip(cells, widths)))
    for peer, values in ratios.items():
        if values:
            geomean = math.exp(sum(map(math.log, values)) / len(values))
            print(f"fa2/{peer}: geometric mean {truncated(geomean)}, min {truncated(min(values))} "
                  f"over {len(values)} shapes (ratios truncated)")


def print_notes(rows, names):
    """Failures, errors, and what stands in for flash-attn when it is missing."""
    failed = [r for r in rows if r["check"] == "fail"]
    for row in failed:
        print(f"CHECK FAILED: {row['provider']} B={row['B']} H={row['H']} N={row['N_Q']} D={row['D']} "
              f"{row['dtype']} causal={row['causal']}: rel_err {row['rel_err']} > {MAX_REL_ERR}")
    errors = {(r["provider"], r["error"]) for r in rows if r["check"] == "error"}
    for provider, error in sorted(errors):
        print(f"error ({provider}): {error}")
    if "sdpa_flash" in names and not any(r["provider"] == "flash_attn" and r["check"] != "error" for r in rows):
        print("note: flash_attn was not measured; 'FA2 (PyTorch-vendored)' is SDPA's FLASH backend, the FA2 "
              "kernels vendored in PyTorch. On an H200, in a separate run (book/results/peers_h200.csv), "
              "flash-attn 2.8.3 ran 0.99-1.14x its speed (geometric mean 1.055x).")


PROVIDER_COLORS = {"fa2": "#d62728", "fa2_ch6": "#ff9896", "sdpa_flash": "#1f77b4", "flash_attn": "#17becf",
                   "sdpa_cudnn": "#2ca02c", "sdpa_efficient": "#9467bd", "sdpa_math": "#8c564b", "flex": "#ff7f0e"}
# Providers without a color of their own (the ladder's fa2@v0 ... fa2@v5) take these, in the order of `names`.
OTHER_COLORS = ["#7f7f7f", "#bcbd22", "#e377c2", "#aec7e8", "#c49c94", "#dbdb8d", "#9edae5", "#c5b0d5"]


def provider_colors(names):
    """{provider: color}, one per provider for every bar it has (matplotlib's own cycle would give each bar the
    next color)."""
    others = iter(OTHER_COLORS * len(names))
    return {name: PROVIDER_COLORS.get(name) or next(others) for name in names}


def plot_panel(ax, groups, names, peer):
    """One panel: a group of bars per shape, one bar per provider, fa2's ratio to peer above fa2's bar."""
    bar = 0.8 / len(names)
    colors = provider_colors(names)
    for x, (shape, row) in enumerate(groups):
        for i, name in enumerate(names):
            if row[name]["check"] != "error":
                ax.bar(x + (i - (len(names) - 1) / 2) * bar, float(row[name]["tflops"]), bar,
                       color=colors[name], hatch="//" if row[name]["check"] == "fail" else None,
                       label=row[name]["label"])
        r = ratio(row["fa2"], row[peer]) if peer else None
        if r is not None:                     # on fa2's own bar: the label is fa2's ratio to the peer
            fa2_x = x + (names.index("fa2") - (len(names) - 1) / 2) * bar
            ax.annotate(f"{truncated(r, 2)}×", (fa2_x, float(row["fa2"]["tflops"])), xytext=(0, 3),
                        textcoords="offset points", ha="center", fontsize=8, fontweight="bold",
                        color=PROVIDER_COLORS["fa2"])
    ax.set_xticks(range(len(groups)), [f"B={s.B} H={s.H if s.H == s.Hkv else f'{s.H}/{s.Hkv}'}\nN={s.N}"
                                       for s, _ in groups], fontsize=9)
    ax.set_ylabel("TFLOP/s")
    ax.margins(y=0.12)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)


def plot(rows, names, path, sweep):
    """Grouped bars of TFLOP/s, one panel per (dtype, D, causal); hatched bars failed their check."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = {}
    for key, row in by_shape(rows).items():
        B, H, Hkv, N, D, causal, dtype = key
        panels.setdefault((dtype, D, causal), []).append((Shape(*key), row))
    most = max(len(groups) for groups in panels.values())
    ncols = 1 if most > 6 else min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    width, height = max(6.0, 0.22 * most * len(names) + 2.0) * ncols, 3.6 * nrows + 1.0
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False)
    peer = next((p for p in RATIO_PEERS if p in names and "fa2" in names), None)
    for ax, ((dtype, D, causal), groups) in zip(axes.flat, panels.items()):
        plot_panel(ax, groups, names, peer)
        ax.set_title(f"{dtype}, D={D}, {'causal' if causal else 'non-causal'}", fontsize=11)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    legend = {}                       # label -> handle over every panel (a provider may error in some)
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(label, handle)
    dtypes = "/".join(sorted({row["dtype"] for row in rows}))
    ratio_note = f"; above fa2's bars: fa2 / {all_providers()[peer].label}" if peer else ""
    fig.suptitle(f"Attention forward, {sweep} sweep: TFLOP/s on {rows[0]['device']} ({dtypes}){ratio_note}",
                 y=1 - 0.2 / height, fontsize=13)
    fig.legend(legend.values(), legend.keys(), loc="upper center", ncol=min(len(legend), 4), frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.45 / height))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.9 / height))
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


# ------------------------------------------------------------------------------------------------- CLI

def parse_args(argv):
    """The command line, checked: known sweep and providers, Hkv dividing every H."""
    parser = argparse.ArgumentParser(prog="python -m fa2.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", choices=sorted([*SWEEPS, "decode", *DROPIN_SWEEPS]),
                        default="tiny" if runtime.DEVICE != "cuda" else "headline",
                        help="named set of shapes (default: headline on a GPU, tiny on the CPU)")
    parser.add_argument("--providers", help=f"comma list from {','.join(all_providers())} "
                                            f"(default here: {','.join(default_providers())})")
    parser.add_argument("--out", type=Path, default=Path("bench-results"),
                        help="output folder (default ./bench-results; the book's numbers live in book/results)")
    parser.add_argument("--name", help="file stem of the CSV and PNG (default: the sweep's name)")
    parser.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up time per run (ms)")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="do_bench timed repetition time per run (ms)")
    parser.add_argument("--rounds", type=int, metavar="R",
                        help="time every provider of a shape in R interleaved rounds (the order rotated) and keep "
                             f"the median (default: {SWEEP_ROUNDS} for those sweeps, 1 for the others)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--gqa", type=int, metavar="HKV", help="number of KV heads (default: as many as query heads)")
    parser.add_argument("--max-n", type=int, metavar="N", help="only the sweep's shapes with N <= this")
    parser.add_argument("--min-n", type=int, metavar="N",
                        help="only the sweep's shapes with N >= this (a long sweep in two runs: --max-n, --min-n)")
    parser.add_argument("--quick", action="store_true", help="decode sweep: fewer shapes and candidates")
    parser.add_argument("--no-tune", action="store_true", help="decode sweep: skip the fa2_tune candidate rows")
    parser.add_argument("--from-csv", type=Path, metavar="CSV",
                        help="measure nothing: print the table and draw the plot of a CSV this CLI wrote")
    args = parser.parse_args(argv)
    if runtime.DEVICE != "cuda" and not args.from_csv and args.sweep not in CPU_SWEEPS:
        parser.error(f"the {args.sweep} sweep needs a GPU: here kernels run under the Triton interpreter, which "
                     f"would take hours at these sizes; on a CPU run --sweep {' or '.join(CPU_SWEEPS)}")
    args.shapes = [s for s in SWEEPS.get(args.sweep, lambda hkv: [])(args.gqa)
                   if (args.max_n is None or s.N <= args.max_n) and (args.min_n is None or s.N >= args.min_n)]
    if args.gqa is not None and (args.gqa < 1 or any(s.H % args.gqa for s in args.shapes)):
        parser.error(f"--gqa {args.gqa} must divide every H in the {args.sweep} sweep")
    if args.sweep in DROPIN_SWEEPS:   # their own peers (fa2/bench_dropin.py)
        from fa2 import bench_dropin
        known, default = bench_dropin.providers(), bench_dropin.default_providers()
    elif args.sweep == "decode":      # fa2/bench_decode.py's providers; default: every one that runs here
        from fa2 import bench_decode
        known, default = bench_decode.providers(), None
    else:
        known, default = all_providers(), default_providers()
    args.providers = list(dict.fromkeys(filter(None, args.providers.split(",")))) if args.providers \
        else default
    unknown = sorted(set(args.providers or ()) - set(known))
    if unknown:
        parser.error(f"unknown providers {unknown}; choose from {sorted(known)}")
    args.name = args.name or args.sweep
    args.command = "python -m fa2.bench " + shlex.join(argv)
    return args


INT_COLUMNS = ("B", "H", "Hkv", "N_Q", "N_KV", "D")


def read_rows(path):
    """The rows of a CSV this CLI wrote, with the types run_sweep gives them."""
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    for row in rows:
        row.update({c: int(row[c]) for c in INT_COLUMNS}, causal=row["causal"] == "True")
    return rows


def replot(args):
    """--from-csv: the table and the plot of an earlier run (the PNG lands beside the CSV)."""
    rows = read_rows(args.from_csv)
    names = list(dict.fromkeys(row["provider"] for row in rows))
    print_table(rows, names)
    print_notes(rows, names)
    if not args.no_plot:
        path = args.from_csv.with_suffix(".png")
        plot(rows, names, path, rows[0]["sweep"])
        print(f"wrote {path}")
    return 0


def main(argv=None):
    """Run a sweep, write the CSV (and PNG), print the table; 1 if an output failed or fa2 raised, else 0."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if args.from_csv:
        return replot(args)
    if args.sweep in DROPIN_SWEEPS:   # chapter 10's problems and peers: fa2/bench_dropin.py
        from fa2 import bench_dropin
        return bench_dropin.exit_code(bench_dropin.run_sweep(args.sweep, args.out, args.providers,
                                                             command=args.command, rep_ms=args.rep_ms,
                                                             rounds=sweep_rounds(args.sweep, args.rounds)))
    if args.sweep == "decode":        # fa2.decode against its peers: a sweep of its own (fa2/bench_decode.py)
        from fa2 import bench_decode
        rows = bench_decode.run_sweep(args.out, quick=args.quick, tune=not args.no_tune, command=args.command,
                                      plot_png=not args.no_plot, names=args.providers,
                                      rounds=sweep_rounds(args.sweep, args.rounds))
        bad = [r for r in rows if (r["provider"] == "fa2" and r["check"] == "error")
               or (r["provider"].startswith("fa2") and r["check"] == "fail")]   # a candidate may not compile
        return 1 if bad else 0
    providers = [all_providers()[name] for name in args.providers]
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / f"{args.name}.csv"
    print(f"{runtime.describe()}\n{len(args.shapes)} shapes × {len(providers)} providers -> {csv_path}")
    with open(csv_path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS)
        writer.writeheader()

        def write(row):               # flushed row by row: a run cut short still leaves its measurements
            writer.writerow(row)
            file.flush()

        rows = run_sweep(args.sweep, args.shapes, providers, args, write)
    print_table(rows, args.providers)
    print_notes(rows, args.providers)
    print(f"wrote {csv_path}")
    if not args.no_plot:
        plot(rows, args.providers, args.out / f"{args.name}.png", args.sweep)
        print(f"wrote {args.out / args.name}.png")
    bad = [r for r in rows if r["check"] == "fail" or (r["provider"] == "fa2" and r["check"] == "error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
