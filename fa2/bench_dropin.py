"""Benchmarks of chapter 10: packed variable-length batches and sliding windows, each against its peers.

    python -m fa2.bench --sweep varlen --out DIR     # DIR/varlen.csv
    python -m fa2.bench --sweep window --out DIR     # DIR/window.csv
    from fa2.bench_dropin import run_sweep           # what those commands call

``varlen``: 16 sequences with lengths drawn uniformly from 128...4096 (torch.Generator seed 0, on the CPU, so
every machine draws the same), bf16, causal, Hq = 32, Hkv = 8, D = 128. Providers: ``fa2``
(``fa2.attention_varlen`` on the packed tensors), ``flex`` (``torch.compile(flex_attention)`` on the packed
tensors as one (1, H, total, D) sequence with a causal document mask), ``sdpa_padded`` (SDPA's FLASH backend,
``is_causal``, on the zero-padded (16, H, 4096-ish, D) batch; padding sits after each sequence, so causal
rows never see it) and ``flash_attn`` (``flash_attn_varlen_func``) when importable. The padding and the
layout changes are made once, before timing: only the attention call is timed.

``window``: B = 1, H = 16, N = 32768, D = 128, bf16, causal with ``window=(4096, 0)``: ``fa2``
(``fa2.attention(window=...)``), ``flex`` with a sliding-window block mask, ``flash_attn`` with
``window_size`` when importable; and the same shape without a window (plain causal) for ``fa2`` and
``sdpa_flash``, the cost a window saves.

TFLOP/s count the visible scores only: 4·D·Hq·(visible (query, key) pairs), so a window's TFLOP/s can be set
beside plain causal attention's and a padded batch gets no credit for its padding. Before it is timed, each
output is compared with an fp64 reference (every sequence of the varlen batch; three blocks of 256 query
rows -- first, middle, last -- of the window problem): ``rel_err`` = max|o - ref| / max|ref|; NaN or more
than MAX_REL_ERR gives check=fail. Times are ``fa2.testing.time_ms`` medians (``do_bench``, L2 cleared
between calls), every provider in the same process.
"""

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

import fa2
from fa2 import runtime
from fa2.bench import error_text, flash_attn_version, time_in_rounds, truncated
from fa2.chapters.varlen_reference import masked_attention_reference, random_varlen, visible_window
from fa2.testing import rel_err, time_ms

COLUMNS = ["sweep", "provider", "label", "problem", "B", "Hq", "Hkv", "total_q", "max_seqlen", "D", "dtype",
           "causal", "window", "visible_pairs", "ms", "tflops", "rel_err", "check", "error", "rounds", "round_ms",
           "device", "torch", "triton", "command"]
MAX_REL_ERR = 2e-2
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
REFERENCE_ROWS = 256            # window sweep: query rows per checked block
FLEX_BLOCK = 128                # FlexAttention's default block: its inputs are padded to a multiple


@dataclass(frozen=True)
class Problem:
    """Packed sequences of the given lengths (query and key lengths equal), Hq query and Hkv KV heads."""
    sweep: str
    lengths: tuple
    Hq: int = 32
    Hkv: int = 8
    D: int = 128
    dtype: str = "bf16"
    causal: bool = True
    window: Optional[tuple] = None

    def visible_pairs(self):
        """(query, key) pairs whose score is visible, over every sequence and one head."""
        left = -1 if self.window is None else self.window[0]
        pairs = 0
        for n in self.lengths:
            i = torch.arange(n, dtype=torch.float64)
            if self.causal:
                pairs += (torch.clamp(i, max=left) if left >= 0 else i).sum().item() + n
            else:
                pairs += visible_window(n, n, False, self.window).sum().item()
        return int(pairs)

    def tflops(self, ms):
        return 4 * self.D * self.Hq * self.visible_pairs() / (ms * 1e-3) / 1e12

    def name(self):
        lengths = (f"{len(self.lengths)} seqs {min(self.lengths)}..{max(self.lengths)}"
                   if self.sweep == "varlen" else f"B={len(self.lengths)} N={self.lengths[0]}")
        window = "" if self.window is None else f" window={self.window}"
        return f"{lengths} H={self.Hq}/{self.Hkv} D={self.D}{' causal' if self.causal else ''}{window}"


def varlen_lengths(count=16, low=128, high=4096, seed=0):
    """The varlen sweep's lengths: uniform in [low, high], drawn on the CPU with a fixed seed."""
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randint(low, high + 1, (count,), generator=generator).tolist())


def varlen_problems():
    return [Problem("varlen", varlen_lengths())]


def window_problems(n=32768, left=4096):
    return [Problem("window", (n,), Hq=16, Hkv=16, window=(left, 0)), Problem("window", (n,), Hq=16, Hkv=16)]


def tiny_problems(sweep):
    """CPU-sized problems of each sweep for the interpreter (tests)."""
    if sweep == "varlen":
        return [Problem("varlen", (5, 40, 17), Hq=2, Hkv=1, D=16)]
    return [Problem("window", (96,), Hq=2, Hkv=2, D=16, window=(20, 0)), Problem("window", (96,), 2, 2, 16)]


SWEEPS = {"varlen": varlen_problems, "window": window_problems}


# ------------------------------------------------------------------------------------------------ inputs

@dataclass
class Inputs:
    """A problem's tensors: packed q (total, Hq, D), k and v (total, Hkv, D), int32 cu_seqlens; for the
    window sweep (one length) `bhnd` holds the same as (B, H, N, D) views."""
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    cu_seqlens: torch.Tensor
    max_seqlen: int
    bhnd: Optional[tuple] = None


def make_inputs(problem, generator):
    q, k, v, cu, _ = random_varlen(problem.lengths, problem.lengths, problem.Hq, problem.Hkv, problem.D,
                                   DTYPES[problem.dtype], generator=generator)
    bhnd = None
    if problem.sweep == "window":       # (B·N, H, D) -> (B, H, N, D) views of the same memory
        B, N = len(problem.lengths), problem.lengths[0]
        bhnd = tuple(t.view(B, N, t.shape[1], t.shape[2]).transpose(1, 2) for t in (q, k, v))
    return Inputs(q, k, v, cu, max(problem.lengths), bhnd)


def reference(problem, x):
    """(row index, o) of the rows checked, fp64: every row of a varlen batch; REFERENCE_ROWS-row blocks at the
    start, the middle and the end of each window-sweep sequence (their keys from the window's start)."""
    left = -1 if problem.window is None else problem.window[0]
    rows, outs = [], []
    bounds = x.cu_seqlens.tolist()
    for start, end in zip(bounds, bounds[1:]):
        n = end - start
        blocks = [(0, n)] if problem.sweep == "varlen" else [
            (b, min(n, b + REFERENCE_ROWS)) for b in sorted({0, n // 2, max(0, n - REFERENCE_ROWS)})]
        for r0, r1 in blocks:
            k0 = 0 if left < 0 else max(0, r0 - left)
            one = lambda t, a, b: t[start + a:start + b].transpose(0, 1)[None]     # (1, H, rows, D)
            o = masked_attention_reference(one(x.q, r0, r1), one(x.k, k0, r1), one(x.v, k0, r1), problem.causal,
                                           None, problem.window)
            rows.append(torch.arange(start + r0, start + r1, device=x.q.device))
            outs.append(o[0].transpose(0, 1))                                        # (rows, H, D)
    return torch.cat(rows), torch.cat(outs)


# --------------------------------------------------------------------------------------------- providers

@dataclass
class Provider:
    """build(problem, x) -> (fn, packed): fn() is timed, packed(out) is its output as (total, Hq, D)."""
    name: str
    label: str
    build: Callable
    applies: Callable = lambda problem: True


def build_fa2(problem, x):
    """fa2.attention_varlen on the packed batch; fa2.attention on (B, H, N, D) for the window sweep."""
    if problem.sweep == "varlen":
        return build_fa2_ch10(problem, x)
    q, k, v = x.bhnd
    return (lambda: fa2.attention(q, k, v, causal=problem.causal, window=problem.window),
            lambda o: o.transpose(1, 2).flatten(0, 1))


def build_fa2_ch10(problem, x):
    """fa2.attention_varlen on the packed tensors: chapter 10's kernel. As the provider fa2_ch10, on the window
    sweep's plain causal problem: the kernel windowed calls run, without the window, where fa2.attention takes
    chapter 6's (or chapter 12's Gluon kernel, where its sm_90 table lists the shape); its rate beside the
    windowed call's isolates the window."""
    fn = lambda: fa2.attention_varlen(x.q, x.k, x.v, x.cu_seqlens, x.cu_seqlens, x.max_seqlen, x.max_seqlen,
                                      causal=problem.causal, window=problem.window)
    return fn, lambda o: o


def sdpa_backend():
    """FLASH on a GPU (the FA2 kernels vendored in PyTorch); MATH under the interpreter."""
    return SDPBackend.FLASH_ATTENTION if runtime.DEVICE == "cuda" else SDPBackend.MATH


def build_sdpa_padded(problem, x):
    """SDPA on the zero-padded (B, H, max_len, D) batch, is_causal (padding after each sequence is never seen
    by a real row); the padded copies are made here, once."""
    B, L = len(problem.lengths), x.max_seqlen
    bounds = x.cu_seqlens.tolist()

    def padded(t):                                    # (total, H, D) -> (B, H, L, D), zeros past each length
        out = t.new_zeros(B, L, t.shape[1], t.shape[2])
        for b, (start, end) in enumerate(zip(bounds, bounds[1:])):
            out[b, :end - start] = t[start:end]
        return out.transpose(1, 2).contiguous()

    q, k, v = padded(x.q), padded(x.k), padded(x.v)

    def fn():
        with sdpa_kernel(sdpa_backend()):
            return F.scaled_dot_product_attention(q, k, v, is_causal=problem.causal,
                                                  enable_gqa=problem.Hq != problem.Hkv)

    def packed(o):                                    # (B, H, L, D) -> (total, H, D)
        o = o.transpose(1, 2)
        return torch.cat([o[b, :end - start] for b, (start, end) in enumerate(zip(bounds, bounds[1:]))])

    return fn, packed


def build_sdpa_flash(problem, x):
    """SDPA's FLASH backend on (B, H, N, D), is_causal: plain causal attention (no window)."""
    q, k, v = x.bhnd

    def fn():
        with sdpa_kernel(sdpa_backend()):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=problem.Hq != problem.Hkv)

    return fn, lambda o: o.transpose(1, 2).flatten(0, 1)


_compiled_flex = None


def build_flex(problem, x):
    """torch.compile(flex_attention) on the packed batch as one sequence: a causal document mask (varlen) or a
    causal sliding-window mask; the block mask is built here, once."""
    global _compiled_flex
    if runtime.DEVICE != "cuda":
        raise RuntimeError("flex_attention is benchmarked on CUDA only")
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from fa2._triton_compat import raise_recompile_limit
    if _compiled_flex is None:
        raise_recompile_limit()
        _compiled_flex = torch.compile(flex_attention, dynamic=False)
    total = x.q.shape[0]
    padded = triton.cdiv(total, FLEX_BLOCK) * FLEX_BLOCK     # whole 128-row blocks: the padding is a
    if problem.sweep == "varlen":                           # document of its own, its rows dropped
        lengths = torch.tensor([*problem.lengths, padded - total], device=x.q.device)
        document = torch.repeat_interleave(torch.arange(len(lengths), device=x.q.device), lengths)  # (padded,)

        def mask(b, h, q_idx, kv_idx):
            return (document[q_idx] == document[kv_idx]) & (q_idx >= kv_idx)
    else:
        left = problem.window[0]

        def mask(b, h, q_idx, kv_idx):
            return (q_idx >= kv_idx) & (q_idx - kv_idx <= left)

    block_mask = create_block_mask(mask, B=None, H=None, Q_LEN=padded, KV_LEN=padded, device=x.q.device)
    # (1, H, padded, D) contiguous copies, made once
    q, k, v = (F.pad(t, (0, 0, 0, 0, 0, padded - total)).transpose(0, 1)[None].contiguous()
               for t in (x.q, x.k, x.v))
    fn = lambda: _compiled_flex(q, k, v, block_mask=block_mask, enable_gqa=problem.Hq != problem.Hkv)
    return fn, lambda o: o[0, :, :total].transpose(0, 1)


def build_flash_attn(problem, x):
    """flash_attn_varlen_func on the packed tensors (window_size for the window sweep)."""
    from flash_attn import flash_attn_varlen_func
    window = (-1, -1) if problem.window is None else problem.window
    fn = lambda: flash_attn_varlen_func(x.q, x.k, x.v, x.cu_seqlens, x.cu_seqlens, x.max_seqlen, x.max_seqlen,
                                        causal=problem.causal, window_size=window)
    return fn, lambda o: o


def providers():
    """Every provider by name, whether or not it can run here."""
    varlen = lambda p: p.sweep == "varlen"
    windowed = lambda p: p.sweep == "window" and p.window is not None
    plain = lambda p: p.sweep == "window" and p.window is None
    return {p.name: p for p in [
        Provider("fa2", "fa2 (Triton)", build_fa2),
        Provider("fa2_ch10", "fa2, chapter 10's kernel", build_fa2_ch10, plain),
        Provider("flex", "FlexAttention (compiled)", build_flex, lambda p: varlen(p) or windowed(p)),
        Provider("sdpa_padded", "SDPA FLASH, zero-padded batch", build_sdpa_padded, varlen),
        Provider("sdpa_flash", "SDPA FLASH (no window)", build_sdpa_flash, plain),
        Provider("flash_attn", f"flash-attn {flash_attn_version() or '(not installed)'}", build_flash_attn,
                 lambda p: varlen(p) or windowed(p)),
    ]}


def default_providers():
    """Names of the providers that can run here: every GPU peer on CUDA (flash_attn when importable)."""
    if runtime.DEVICE != "cuda":
        return ["fa2", "sdpa_padded"]
    return ["fa2", "fa2_ch10", "flex", "sdpa_padded", "sdpa_flash"] + (["flash_attn"] if flash_attn_version() else [])


# ------------------------------------------------------------------------------------------------ measuring

def prepare(provider, problem, x, ref_rows, ref, rep_ms):
    """(row, timer): the provider's output checked on the reference rows into a CSV row without times, and
    timer() -> ms of one timing (None if it could not run: the error column says why)."""
    row = {"provider": provider.name, "label": provider.label, "check": "error", "error": ""}
    try:
        fn, packed = provider.build(problem, x)
        out = packed(fn())[ref_rows]
        err = rel_err(out, ref)
        row["rel_err"], row["check"] = f"{err:.2e}", "ok" if err <= MAX_REL_ERR else "fail"   # NaN fails
        del out
    except Exception as error:                        # missing package, refused shape, OOM: record, go on
        row["error"] = error_text(error)
        return row, None
    return row, lambda: time_ms(fn, warmup_ms=25.0, rep_ms=rep_ms)


def measure(provider, problem, x, ref_rows, ref, rep_ms):
    """One CSV row: check the provider's output on the reference rows, then time it once; errors are recorded."""
    return measure_rounds([provider], problem, x, ref_rows, ref, rep_ms, 1)[0]


def measure_rounds(providers, problem, x, ref_rows, ref, rep_ms, rounds):
    """The rows of every provider at one problem: each checked first, then timed in `rounds` interleaved rounds
    (fa2.bench.time_in_rounds: the order rotated, the median kept)."""
    rows = time_in_rounds([prepare(p, problem, x, ref_rows, ref, rep_ms) for p in providers], rounds,
                          problem.tflops)
    if runtime.DEVICE == "cuda":
        torch.cuda.synchronize()
    return rows


def problem_columns(problem, environment):
    return {"sweep": problem.sweep, "problem": problem.name(), "B": len(problem.lengths), "Hq": problem.Hq,
            "Hkv": problem.Hkv, "total_q": sum(problem.lengths), "max_seqlen": max(problem.lengths),
            "D": problem.D, "dtype": problem.dtype, "causal": problem.causal,
            "window": "" if problem.window is None else f"{problem.window[0]},{problem.window[1]}",
            "visible_pairs": problem.visible_pairs(), **environment}


def device_name():
    if runtime.DEVICE == "cuda":
        return torch.cuda.get_device_name(0)
    return "CPU (Triton interpreter)" if runtime.INTERPRET else "CPU"


def run_sweep(sweep, out_dir, names=None, problems=None, command="", rep_ms=100.0, rounds=1):
    """Check and time every (problem, provider) of a sweep, in `rounds` interleaved rounds (the median kept);
    write out_dir/<sweep>.csv; print the table."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    problems = SWEEPS[sweep]() if problems is None else problems
    every = providers()
    chosen = [every[n] for n in (names or default_providers())]
    environment = {"device": device_name(), "torch": torch.__version__, "triton": triton.__version__,
                   "command": command}
    csv_path = out_dir / f"{sweep}.csv"
    print(f"{runtime.describe()}\n{sweep}: {len(problems)} problems, providers "
          f"{', '.join(p.name for p in chosen)} -> {csv_path}", flush=True)
    rows = []
    with open(csv_path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        for problem in problems:
            started = time.perf_counter()
            x = make_inputs(problem, torch.Generator(runtime.DEVICE).manual_seed(0))
            ref_rows, ref = reference(problem, x)
            applying = [provider for provider in chosen if provider.applies(problem)]
            for result in measure_rounds(applying, problem, x, ref_rows, ref, rep_ms, rounds):
                row = {**problem_columns(problem, environment), **result}
                writer.writerow(row)
                file.flush()
                rows.append(row)
            print(f"{problem.name()}: {time.perf_counter() - started:.1f} s", flush=True)
            del x, ref
            if runtime.DEVICE == "cuda":
                torch.cuda.empty_cache()
    print_summary(rows)
    print(f"wrote {csv_path}")
    return rows


# ------------------------------------------------------------------------------------------------ reporting

def read_rows(path):
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def _ok(row):
    return row["check"] == "ok" and row["tflops"] not in ("", None)


def summary(rows):
    """{"ratios": {(problem, peer): fa2's TFLOP/s over the peer's}, "window_vs_causal": fa2's TFLOP/s with the
    window over fa2's without (window sweep), or None, "window_vs_same_kernel": the same over chapter 10's kernel
    without the window (fa2_ch10), or None}; only rows that passed their check count."""
    fa2_rows = {r["problem"]: r for r in rows if r["provider"] == "fa2" and _ok(r)}
    ratios = {(r["problem"], r["provider"]): float(fa2_rows[r["problem"]]["tflops"]) / float(r["tflops"])
              for r in rows if r["provider"] != "fa2" and _ok(r) and r["problem"] in fa2_rows}
    windowed = [r for r in fa2_rows.values() if r["sweep"] == "window" and r["window"]]
    plain = [r for r in fa2_rows.values() if r["sweep"] == "window" and not r["window"]]
    window_vs_causal = (float(windowed[0]["tflops"]) / float(plain[0]["tflops"])) if windowed and plain else None
    ch10 = [r for r in rows if r["provider"] == "fa2_ch10" and _ok(r)]
    same_kernel = float(windowed[0]["tflops"]) / float(ch10[0]["tflops"]) if windowed and ch10 else None
    return {"ratios": ratios, "window_vs_causal": window_vs_causal, "window_vs_same_kernel": same_kernel}


def print_summary(rows):
    """One line per (problem, provider): ms, TFLOP/s on visible scores, check; then fa2's ratios (truncated,
    never rounded up)."""
    print("\nTFLOP/s count visible scores only (4·D·Hq·visible pairs); ratios are fa2's TFLOP/s over the peer's")
    for row in rows:
        cells = (f"{row['ms']:>9s} ms {float(row['tflops']):7.1f} TFLOP/s" if row.get("ms") else
                 f"{'':>9s}    {'':>7s}        ")
        print(f"{row['problem']:58s} {row['provider']:12s} {cells}  {row['check']}"
              f"{'  ' + row['error'] if row['error'] else ''}")
    result = summary(rows)
    for (problem, peer), r in result["ratios"].items():
        print(f"fa2 / {peer:12s} {truncated(r):>6s}x   {problem}")
    if result["window_vs_causal"] is not None:
        print(f"fa2 with the window / fa2 plain causal at the same N (TFLOP/s on visible scores): "
              f"{truncated(result['window_vs_causal'])}")
    if result["window_vs_same_kernel"] is not None:
        print(f"fa2 with the window / chapter 10's kernel plain causal at the same N: "
              f"{truncated(result['window_vs_same_kernel'])}")
    if any(r["provider"] == "sdpa_padded" for r in rows) and not any(r["provider"] == "flash_attn" for r in rows):
        print("note: flash_attn was not importable; SDPA's FLASH backend (the FA2 kernels vendored in PyTorch) "
              "stands in on the padded batch. On an H200, in a separate run (book/results/peers_h200.csv), "
              "flash-attn 2.8.3 ran 0.99-1.14x its speed (geometric mean 1.055x).")


def plot(rows, ax=None):
    """Bars of TFLOP/s (visible scores) per provider, one group per problem; fa2's ratio above each peer."""
    import matplotlib.pyplot as plt

    ax = ax or plt.gca()
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    names = list(dict.fromkeys(r["provider"] for r in rows))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        for x, problem in enumerate(problems):
            row = next((r for r in rows if r["problem"] == problem and r["provider"] == name and _ok(r)), None)
            if row is not None:                       # one legend entry per provider
                ax.bar(x + (i - (len(names) - 1) / 2) * width, float(row["tflops"]), width, color=f"C{i}",
                       label=row["label"] if row["label"] not in ax.get_legend_handles_labels()[1] else None)
    labels = [p.replace(" H=", "\nH=").replace(" window=", "\nwindow=") for p in problems]   # one line each
    ax.set_xticks(range(len(problems)), labels, fontsize=8)
    ax.set_ylabel("TFLOP/s (visible scores)")
    top = ax.get_ylim()[1]
    ax.set_ylim(top=top * 1.45)                         # room above the bars for the legend,
    ax.set_yticks([t for t in ax.get_yticks() if 0 <= t <= top])   # and no tick labels behind it
    ax.legend(fontsize=8, loc="upper center", ncols=2, frameon=False)
    return ax


def exit_code(rows):
    """1 if an output failed its check or fa2 raised, else 0."""
    bad = [r for r in rows if r["check"] == "fail" or (r["provider"] == "fa2" and r["check"] == "error")]
    return 1 if bad else 0


__all__ = ["Problem", "run_sweep", "read_rows", "summary", "print_summary", "plot", "varlen_lengths",
           "tiny_problems", "SWEEPS"]
