"""Profile the forward kernels with Nsight Compute: ``python -m fa2.profile --out DIR`` (needs a GPU and ncu).

    python -m fa2.profile --out book/results                  # ceilings, timings, then ncu on every case
    python -m fa2.profile --out /tmp/p --studies kernels      # only the four kernels on the two shapes
    python -m fa2.profile --out /tmp/p --studies gluon        # the Gluon kernel, fa2 and cuDNN at the money shot
    python -m fa2.profile --out /tmp/p --no-ncu               # ceilings and timings only (no ncu here)

One run measures, on the GPU it runs on:

1. the **ceilings**: a bf16 matmul of 8192³ through ``torch.matmul`` (TFLOP/s) and a device-to-device copy
   of 1 GiB (GB/s, bytes read + bytes written), each a ``triton.testing.do_bench`` median;
2. every **case** -- the chapter-5 kernel, ``fa2.attention``, SDPA's FLASH backend (the FA2 kernels vendored
   in PyTorch) and SDPA's cuDNN backend on (2, 16, 4096, 64) and (8, 32, 2048, 128), bf16, causal; a few
   chapter-6 configs that ``prune`` keeps or drops; ``fa2.decode`` on a 32k cache when the package has it --
   checked against SDPA and timed (``do_bench`` median; do_bench empties the L2 before every timed call);
3. every case under **Nsight Compute**: the script runs itself again in ``--target`` mode under ``ncu``, with
   ``--profile-from-start off``; the target warms the case up, then runs it once between
   ``cudaProfilerStart`` and ``cudaProfilerStop``, so each kernel of that one call is profiled once. ncu
   collects the sections SpeedOfLight, LaunchStats, Occupancy and WarpStateStats plus the metrics of
   ``fa2.chapters.checklist`` that ``ncu --query-metrics`` says this ncu knows, with ``--clock-control none``
   (the clocks are left as they are).

It writes into ``--out``: ``profile_ceilings.csv``; ``profile_metrics.csv`` (the kernels and decode) and
``profile_configs.csv`` (the config study), in long format -- one row per (case, kernel launch, metric)
with ncu's raw metric names, units and values, next to the do_bench times (``do_bench_median_ms``), the error
against SDPA (``rel_err``) and, for the configs, what Triton's compiler reported (``triton.*``). Every row
holds the command that made it. Progress and ncu's own messages go to stdout.
"""

import argparse
import csv
import glob
import io
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fa2 import runtime
from fa2.chapters.checklist import LOCAL_MEMORY, METRICS, checklist, summarize
from fa2.chapters.roofline import attention_flops
from fa2.gluon.candidates import CONFIGS as CANDIDATES   # plain data: importing it needs no Gluon

import torch  # noqa: E402  (after fa2.runtime, which picks GPU or interpreter before triton loads)
import triton  # noqa: E402

from fa2.testing import rel_err, time_ms  # noqa: E402

KERNEL_SHAPES = [(2, 16, 4096, 64), (8, 32, 2048, 128)]         # (B, H, N, D), bf16, causal
KERNEL_PROVIDERS = ["chapter5", "fa2", "sdpa_flash", "sdpa_cudnn"]
CONFIG_SHAPE = (8, 32, 2048, 128)                                 # D = 128: where the pruning rules bite
STUDY_CONFIGS = [  # chapter 6's kept and pruned configs (prune("fast", ..., 128, 227 KB) says which)
    dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3),     # kept: the shipped choice for this shape
    dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2),    # kept: the default
    dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2),   # kept
    dict(BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=2),   # pruned: 128×128 scores over 4 warps
    dict(BLOCK_M=256, BLOCK_N=32, num_warps=4, num_stages=2),    # pruned: accumulator > 128 registers
    dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=4),   # pruned: over the shared-memory limit
]
DECODE_SHAPE = dict(B=1, H=32, Hkv=8, N_Q=1, N_KV=32768, D=128)
# the gluon study (chapter 12): the config the shipped table runs at the money shot (128-key tiles, persistent, K and
# V freed separately), beside chapter 6's kernel (not "fa2": fa2.attention may itself run the Gluon kernel there)
# and cuDNN
# the config the shipped table runs at the money shot (book/results/profile_gluon.csv was made with the one before
# it, r4_n128b2_pingpong_persistent_split: the same without HALF_DIAGONAL)
GLUON_CONFIGS = [dict(rung=rung, **config)
                 for rung, config in (CANDIDATES["r4_n128b2_pingpong_persistent_split_half"],)]
GLUON_CONFIG = GLUON_CONFIGS[0]
GLUON_PEERS = ["chapter6", "sdpa_cudnn"]   # chapter6: fa2.attention's plan with the Gluon dispatch off
STUDIES = ("kernels", "configs", "decode", "gluon")   # one query token, GQA 32 -> 8, 32k cache
SECTIONS = ["SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats"]
MATMUL_N = 8192                      # the matmul ceiling: (N, N) @ (N, N) bf16
COPY_BYTES = 2**30                   # the copy ceiling: 1 GiB read and 1 GiB written per copy
TARGET_WARMUP_CALLS = 3              # calls before the profiled one (compilation, autotune, caches)
DROPPED_PREFIXES = ("device__attribute_", "profiler__")   # ncu's raw page: device facts, not measurements
COLUMNS = ["study", "provider", "B", "H", "Hkv", "N_Q", "N_KV", "D", "dtype", "causal", "config", "launch",
           "kernel", "source", "metric", "unit", "value", "command"]
CEILING_COLUMNS = ["quantity", "unit", "value", "how", "device", "torch", "triton", "command"]
CPU_MESSAGE = ("fa2.profile: needs a CUDA GPU and Nsight Compute (ncu). This machine has no GPU: kernels run "
               "under the Triton interpreter, which has no hardware counters. Run it on a GPU machine "
               "(`bash gpu/profile.sh`); chapter 8 reads the CSVs it writes.")


# ------------------------------------------------------------------------------------------------ cases

@dataclass(frozen=True)
class Case:
    """One thing to profile: a provider on one problem; q (B, H, N_Q, D), k and v (B, Hkv, N_KV, D)."""
    study: str                       # "kernels", "configs" or "decode"
    provider: str                    # chapter5, fa2, sdpa_flash, sdpa_cudnn, fast (a chapter-6 config), decode, gluon,
    #                                  chapter6 (fa2.attention's plan with the Gluon dispatch off)
    B: int
    H: int
    Hkv: int
    N_Q: int
    N_KV: int
    D: int
    causal: bool
    dtype: str = "bf16"
    config: str = ""                 # "BLOCK_M=128,BLOCK_N=64,num_warps=4,num_stages=2" for "fast", "rung=4,..." gluon

    def name(self):
        """Short text such as 'fa2 8×32×2048×128' for progress lines."""
        heads = self.H if self.H == self.Hkv else f"{self.H}/{self.Hkv}"
        shape = f"{self.B}×{heads}×{self.N_Q}" + ("" if self.N_Q == self.N_KV else f"×{self.N_KV}")
        return f"{self.provider} {shape}×{self.D}" + (f" [{self.config}]" if self.config else "")

    def flops(self):
        """FLOPs of one call (chapter 8's count: 4·B·H·N_Q·N_KV·D, halved when causal)."""
        return attention_flops(self.B, self.H, self.N_Q, self.N_KV, self.D, self.causal)


def config_text(cfg):
    """A config dict as the CSV's config column: 'BLOCK_M=64,BLOCK_N=64,num_warps=4,num_stages=3'."""
    return ",".join(f"{k}={v}" for k, v in cfg.items())


def parse_config(text):
    """The config column back to a dict of ints."""
    return {k: int(v) for k, v in (item.split("=") for item in text.split(","))} if text else {}


def all_cases(studies):
    """Every case of the named studies, most important first (a run cut short keeps the kernels)."""
    cases = []
    if "kernels" in studies:
        cases += [Case("kernels", p, B, H, H, N, N, D, True) for B, H, N, D in KERNEL_SHAPES
                  for p in KERNEL_PROVIDERS]
    if "configs" in studies:
        B, H, N, D = CONFIG_SHAPE
        cases += [Case("configs", "fast", B, H, H, N, N, D, True, config=config_text(c)) for c in STUDY_CONFIGS]
    if "decode" in studies:
        cases.append(Case("decode", "decode", causal=False, **DECODE_SHAPE))
    if "gluon" in studies:
        B, H, N, D = CONFIG_SHAPE
        cases += [Case("gluon", "gluon", B, H, H, N, N, D, True, config=config_text(c)) for c in GLUON_CONFIGS]
        cases += [Case("gluon", p, B, H, H, N, N, D, True) for p in GLUON_PEERS]
    return cases


def make_inputs(case):
    """N(0, 1) q (B, H, N_Q, D), k and v (B, Hkv, N_KV, D) on the GPU, contiguous, fixed seed."""
    generator = torch.Generator("cuda").manual_seed(0)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[case.dtype]
    shapes = [(case.B, case.H, case.N_Q, case.D)] + 2 * [(case.B, case.Hkv, case.N_KV, case.D)]
    return [torch.randn(shape, device="cuda", generator=generator).to(dtype) for shape in shapes]


def build(case):
    """fn(q, k, v) -> o for the case's provider (raises if it is not available here)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import fa2
    if case.provider == "chapter5":
        from fa2.chapters.forward import attention_forward
        return lambda q, k, v: attention_forward(q, k, v, case.causal)[0]
    if case.provider == "fa2":
        return lambda q, k, v: fa2.attention(q, k, v, causal=case.causal)
    if case.provider in ("sdpa_flash", "sdpa_cudnn"):
        backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}[case.provider]

        def sdpa(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=case.causal)
        return sdpa
    if case.provider == "fast":
        from fa2.chapters.fast import attention_fast
        cfg = parse_config(case.config)
        return lambda q, k, v: attention_fast(q, k, v, case.causal, config=cfg, host_desc=True)[0]
    if case.provider == "chapter6":
        from fa2.bench import build_fa2_ch6                  # it reads only the case's causal flag
        return build_fa2_ch6(case)
    if case.provider == "gluon":
        from fa2.gluon.attention_hopper import attention_gluon
        cfg = parse_config(case.config)
        rung = cfg.pop("rung")
        return lambda q, k, v: attention_gluon(q, k, v, case.causal, rung=rung, config=cfg)[0]
    if case.provider == "decode":
        decode = getattr(fa2, "decode", None)
        if decode is None:
            raise NotImplementedError("fa2.decode does not exist in this version of the package")
        return lambda q, k, v: decode(q, k, v)
    raise ValueError(f"unknown provider {case.provider!r}")


def reference(case, q, k, v):
    """SDPA on the same inputs, the backend of its own choice (causal is top-left there: fine for N_Q = N_KV)."""
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q, k, v, is_causal=case.causal, enable_gqa=case.H != case.Hkv)


def compiler_report(case, q, k, v):
    """What Triton's compiler and the driver say of a chapter-6 config: [(metric, unit, value)].

    ``n_spills`` is the driver's local memory a thread (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES) over 4; a
    config over the shared-memory limit fails to load, and Triton's error says how much it required."""
    from triton.runtime.errors import OutOfResources

    from fa2.chapters.fast import _fa2_fast_kernel, fast_launch
    o = torch.empty_like(q)
    lse = torch.empty(case.B, case.H, case.N_Q, device=q.device, dtype=torch.float32)
    grid, args, options = fast_launch(q, k, v, o, lse, case.causal, config=parse_config(case.config),
                                      host_desc=True)
    try:
        compiled = _fa2_fast_kernel[grid](*args, **options)
        compiled = compiled.result() if hasattr(compiled, "result") else compiled   # async compilation
    except OutOfResources as error:
        return [(f"triton.required_{error.name.replace(' ', '_')}", "byte", error.required),
                (f"triton.limit_{error.name.replace(' ', '_')}", "byte", error.limit)]
    return [("triton.n_regs", "register/thread", compiled.n_regs),
            ("triton.n_spills", "4-byte word/thread", compiled.n_spills),
            ("triton.shared", "byte", compiled.metadata.shared)]


# ------------------------------------------------------------------------------------------- measuring

def matmul_ms(n, warmup_ms, rep_ms):
    """Median ms of torch.matmul on two (n, n) bf16 matrices of N(0, 1) values."""
    generator = torch.Generator("cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=generator)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=generator)
    return time_ms(lambda: torch.matmul(a, b), warmup_ms=warmup_ms, rep_ms=rep_ms)


def copy_ms(nbytes, warmup_ms, rep_ms):
    """Median ms of a device-to-device copy of nbytes random bytes."""
    generator = torch.Generator("cuda").manual_seed(0)
    src = torch.randint(0, 256, (nbytes,), device="cuda", dtype=torch.uint8, generator=generator)
    dst = torch.empty_like(src)
    return time_ms(lambda: dst.copy_(src), warmup_ms=warmup_ms, rep_ms=rep_ms)


def measure_ceilings(warmup_ms, rep_ms):
    """[(quantity, unit, value, how)]: the matmul and copy ceilings, their times and a few device facts."""
    n = MATMUL_N
    mm_ms = matmul_ms(n, warmup_ms, 2 * rep_ms)
    torch.cuda.empty_cache()
    cp_ms = copy_ms(COPY_BYTES, warmup_ms, 2 * rep_ms)
    torch.cuda.empty_cache()
    props = torch.cuda.get_device_properties(0)
    mm_how = f"torch.matmul ({n}, {n}) @ ({n}, {n}) bf16, N(0,1) inputs, 2·{n}³ FLOPs, fa2.testing.time_ms median"
    copy_how = f"dst.copy_(src), {COPY_BYTES} bytes, counting bytes read + written, fa2.testing.time_ms median"
    facts = "torch.cuda.get_device_properties(0)"
    return [
        ("matmul_bf16", "TFLOP/s", 2 * n**3 / (mm_ms * 1e-3) / 1e12, mm_how),
        ("matmul_bf16_median", "ms", mm_ms, mm_how),
        ("copy_d2d", "GB/s", 2 * COPY_BYTES / (cp_ms * 1e-3) / 1e9, copy_how),
        ("copy_d2d_median", "ms", cp_ms, copy_how),
        ("multi_processor_count", "SM", props.multi_processor_count, facts),
        ("L2_cache_size", "byte", getattr(props, "L2_cache_size", ""), facts),
        ("shared_memory_per_block_optin", "byte", getattr(props, "shared_memory_per_block_optin", ""), facts),
        ("regs_per_multiprocessor", "register", getattr(props, "regs_per_multiprocessor", ""), facts),
    ]


def time_case(case, warmup_ms, rep_ms):
    """[(source, metric, unit, value)] of one case: its error against SDPA, its median time, compiler facts."""
    q, k, v = make_inputs(case)
    rows = []
    if case.provider == "fast":
        rows += [("triton", *item) for item in compiler_report(case, q, k, v)]
        if rows[0][1].startswith("triton.required_"):
            return rows                                          # it cannot launch: nothing to time
    fn = build(case)
    o = fn(q, k, v)
    ref = reference(case, q, k, v)
    err = rel_err(o, ref)
    rows.append(("check", "rel_err", "max|o-ref|/max|ref| vs SDPA", err))
    del o, ref
    ms = time_ms(lambda: fn(q, k, v), warmup_ms=warmup_ms, rep_ms=rep_ms)
    rows.append(("do_bench", "do_bench_median_ms", "ms", ms))
    rows.append(("do_bench", "tflops", "TFLOP/s", case.flops() / (ms * 1e-3) / 1e12))
    return rows


def run_target(case):
    """--target mode (under ncu): warm the case up, then run it once inside the profiler's range."""
    q, k, v = make_inputs(case)
    fn = build(case)
    for _ in range(TARGET_WARMUP_CALLS):
        fn(q, k, v)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()                # cudaProfilerStart: ncu profiles from here ...
    fn(q, k, v)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()                 # ... to here (--profile-from-start off)
    return 0


# ------------------------------------------------------------------------------------------------- ncu

def find_ncu(path=None):
    """The ncu executable: --ncu, else PATH, else the usual install folders; None if there is none."""
    candidates = [path] if path else [shutil.which("ncu"), *sorted(glob.glob("/usr/local/cuda*/bin/ncu")),
                                      *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"))]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def parse_query_metrics(text):
    """The base metric names (such as 'sm__throughput') that ``ncu --query-metrics`` lists."""
    return {m.group(1) for line in text.splitlines() if (m := re.match(r"\s*([a-z0-9]+__[a-z0-9_]+)\b", line))}


def requested_metrics(available):
    """The chapter's metric names (fa2.chapters.checklist) whose base name this ncu knows, in order."""
    wanted = [name for names in METRICS.values() for name in names] + LOCAL_MEMORY
    return [name for name in dict.fromkeys(wanted) if name.split(".")[0] in available]


def _number(text):
    """A metric value as a float: thousands separators dropped; None for 'n/a', '' or text."""
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def parse_ncu_csv(text):
    """ncu's CSV (``--csv --page raw``, or the default details page) -> one dict per profiled kernel launch:
    {"launch": ncu's ID, "kernel": name, "metrics": {raw metric name: (unit, value)}}.

    Lines before the header (the program's own output, ``==PROF==`` lines) are skipped; on the raw page the
    row after the header holds the units, metric columns are the names with '__' in them, values may carry
    thousands separators, and 'n/a' or text values are dropped."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    launches = {}
    if "Metric Name" in header:                  # details page: one row per metric
        col = {name: header.index(name) for name in ("ID", "Kernel Name", "Metric Name", "Metric Unit",
                                                     "Metric Value")}
        for r in body:
            launch = launches.setdefault(r[col["ID"]], {"launch": r[col["ID"]], "kernel": r[col["Kernel Name"]],
                                                        "metrics": {}})
            value = _number(r[col["Metric Value"]])
            if value is not None:
                launch["metrics"][r[col["Metric Name"]]] = (r[col["Metric Unit"]], value)
        return list(launches.values())
    units = body.pop(0) if body and body[0][0] == "" else [""] * len(header)   # raw page: units row
    id_col, kernel_col = header.index("ID"), header.index("Kernel Name")
    metric_cols = [i for i, name in enumerate(header) if "__" in name]
    for r in body:
        metrics = {header[i]: (units[i], _number(r[i])) for i in metric_cols if _number(r[i]) is not None}
        launches[r[id_col]] = {"launch": r[id_col], "kernel": r[kernel_col], "metrics": metrics}
    return list(launches.values())


def measurements(launch):
    """[(raw metric name, unit, value)] of one parsed launch, without ncu's device facts."""
    return [(name, unit, value) for name, (unit, value) in launch["metrics"].items()
            if not name.startswith(DROPPED_PREFIXES)]


def ncu_command(ncu, case, metrics, report):
    """The ncu command line that profiles one case into `report`.ncu-rep."""
    sections = [arg for s in SECTIONS for arg in ("--section", s)]
    return [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
            *sections, *(["--metrics", ",".join(metrics)] if metrics else []), "--force-overwrite",
            "--export", str(report), sys.executable, "-m", "fa2.profile", "--target", json.dumps(asdict(case))]


def rejected_metrics(metrics, output):
    """The requested metrics ncu refused (named in its error output); all of them if it names none."""
    if "metric" not in output.lower():
        return []
    return [m for m in metrics if m in output] or list(metrics)


def ncu_profile(ncu, case, metrics, report, deadline):
    """Profile one case under ncu -> (launches as parse_ncu_csv gives them, error text or '').

    Metrics this ncu refuses are removed from `metrics` (so later cases skip them too) and the case runs
    once more with the sections and the rest."""
    path = report.with_name(report.name + ".ncu-rep")
    for attempt in range(2):
        command = ncu_command(ncu, case, metrics, report)
        print("  $ " + shlex.join(command), flush=True)
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return [], "ncu timed out (the case's 90 s or the rest of --budget-s)"
        output = done.stdout + done.stderr
        messages = [line for line in output.splitlines() if line.strip()]
        print("\n".join("    " + line for line in messages[-12:]), flush=True)
        if done.returncode == 0 and path.exists():
            break
        rejected = rejected_metrics(metrics, output)
        if attempt == 1 or not rejected:
            return [], f"ncu exited {done.returncode}: " + (messages[-1] if messages else "no output")
        print(f"  ncu refused {', '.join(rejected)}: dropped, running again", flush=True)
        for name in rejected:
            metrics.remove(name)
    for units in (["--print-units", "base"], []):  # base units (byte, nsecond); older ncu lacks the option
        export = subprocess.run([ncu, "--import", str(path), "--csv", "--page", "raw", *units],
                                capture_output=True, text=True, timeout=120)
        if export.returncode == 0:
            launches = parse_ncu_csv(export.stdout)
            return launches, "" if launches else "ncu profiled no kernel in the range"
    return [], "ncu --import failed: " + export.stderr.strip()[-300:]


# ------------------------------------------------------------------------------------------ writing

class Writer:
    """Long-format rows into one CSV, flushed as they come (a run cut short keeps what it measured)."""

    def __init__(self, path, command):
        self.file = open(path, "w", newline="")
        self.csv = csv.DictWriter(self.file, fieldnames=COLUMNS)
        self.csv.writeheader()
        self.command = command

    def write(self, case, source, metric, unit, value, launch="", kernel=""):
        """One row: a case-level measurement, or (launch, kernel given) one ncu metric of one launch."""
        shape = {k: v for k, v in asdict(case).items() if k in COLUMNS}
        self.csv.writerow({**shape, "launch": launch, "kernel": kernel, "source": source, "metric": metric,
                           "unit": unit, "value": value, "command": self.command})
        self.file.flush()

    def close(self):
        """Close the file."""
        self.file.close()


def write_ceilings(path, rows, command):
    """profile_ceilings.csv: one row per quantity."""
    environment = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "triton": triton.__version__, "command": command}
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CEILING_COLUMNS)
        writer.writeheader()
        for quantity, unit, value, how in rows:
            writer.writerow({"quantity": quantity, "unit": unit, "value": value, "how": how, **environment})


# ------------------------------------------------------------------------------------------ reading

@dataclass
class CaseResult:
    """Everything one run measured of one case: case-level metrics, errors, and each profiled kernel launch."""
    case: Case
    metrics: dict = field(default_factory=dict)     # do_bench, check and triton rows: {metric: value}
    errors: list = field(default_factory=list)
    kernels: list = field(default_factory=list)     # [{"launch", "kernel", "metrics": {raw name: value}}]

    def main_kernel(self):
        """The launch that ran longest (attention itself, not a helper kernel), or None."""
        timed = [k for k in self.kernels if k["metrics"].get("gpu__time_duration.sum") is not None]
        return max(timed, key=lambda k: k["metrics"]["gpu__time_duration.sum"]) if timed else None


def read_results(path):
    """profile_metrics.csv or profile_configs.csv -> [CaseResult], in the file's order."""
    results = {}
    with open(path, newline="") as file:
        for row in csv.DictReader(file):
            case = Case(row["study"], row["provider"], *(int(row[c]) for c in ("B", "H", "Hkv", "N_Q", "N_KV", "D")),
                        row["causal"] == "True", row["dtype"], row["config"])
            result = results.setdefault(case, CaseResult(case))
            if row["source"] == "error":
                result.errors.append(row["value"])
            elif row["launch"] == "":
                result.metrics[row["metric"]] = float(row["value"])
            else:
                launches = {k["launch"]: k for k in result.kernels}
                if row["launch"] not in launches:
                    result.kernels.append({"launch": row["launch"], "kernel": row["kernel"], "metrics": {}})
                    launches[row["launch"]] = result.kernels[-1]
                launches[row["launch"]]["metrics"][row["metric"]] = float(row["value"])
    return list(results.values())


def read_ceilings(path):
    """profile_ceilings.csv -> {quantity: (value, unit)} (numbers where they parse)."""
    with open(path, newline="") as file:
        return {row["quantity"]: (_number(row["value"]), row["unit"]) for row in csv.DictReader(file)}


# ------------------------------------------------------------------------------------------------- CLI

def parse_args(argv):
    """The command line, checked."""
    parser = argparse.ArgumentParser(prog="python -m fa2.profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the CSVs (required unless --target)")
    parser.add_argument("--studies", default="kernels,configs,decode",
                        help="comma list from kernels,configs,decode,gluon (default: the first three)")
    parser.add_argument("--no-ncu", action="store_true", help="measure ceilings and times only; no ncu")
    parser.add_argument("--ncu", help="path of the ncu executable (default: ncu on PATH)")
    parser.add_argument("--budget-s", type=float, default=280.0,
                        help="stop starting new ncu runs after this many seconds from the start (default 280)")
    parser.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up time per run (ms)")
    parser.add_argument("--rep-ms", type=float, default=100.0, help="do_bench timed repetition time per run (ms)")
    parser.add_argument("--target", metavar="CASE_JSON", help=argparse.SUPPRESS)   # internal: run under ncu
    args = parser.parse_args(argv)
    args.studies = [s for s in args.studies.split(",") if s]
    unknown = sorted(set(args.studies) - set(STUDIES))
    if unknown:
        parser.error(f"unknown studies {unknown}; choose from {', '.join(STUDIES)}")
    if args.out is None and args.target is None:
        parser.error("--out DIR is required")
    args.command = "python -m fa2.profile " + shlex.join(argv)
    return args


def print_summary(results):
    """One line per case: time, TFLOP/s and the checklist's quantities of its main kernel."""
    print(f"\n{'case':52s} {'ms':>8s} {'TFLOP/s':>8s} {'SM%':>5s} {'TC%':>5s} {'occ%':>5s} {'DRAM%':>6s} "
          f"{'LS%':>5s} {'regs':>5s} {'local':>6s}")
    for result in results:
        main = result.main_kernel()
        s = summarize(main["metrics"]) if main else {}
        cell = lambda key, fmt: format(s[key], fmt) if s.get(key) is not None else "-"
        ms, tflops = result.metrics.get("do_bench_median_ms"), result.metrics.get("tflops")
        print(f"{result.case.name()[:52]:52s} {ms if ms is not None else math.nan:8.3f} "
              f"{tflops if tflops is not None else math.nan:8.1f} {cell('sm_throughput_pct', '5.1f')} "
              f"{cell('tensor_pct', '5.1f')} {cell('achieved_occupancy_pct', '5.1f')} "
              f"{cell('dram_throughput_pct', '6.1f')} {cell('long_scoreboard_pct', '5.1f')} "
              f"{cell('registers_per_thread', '5.0f')} {cell('local_memory', '6.0f')}"
              + (f"  ERROR {result.errors[0][:60]}" if result.errors else ""))
        if main:
            failed = [c.line for c, _, met in checklist(s) if met is False]
            if failed:
                print(f"{'':52s} not met: {'; '.join(failed)}")


def main(argv=None):
    """Measure and write the CSVs; 2 on a machine without a GPU or ncu, 1 if a kernel case failed, else 0."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    if runtime.DEVICE != "cuda":
        print(CPU_MESSAGE, file=sys.stderr)
        return 2
    if args.target:
        return run_target(Case(**json.loads(args.target)))
    ncu = None if args.no_ncu else find_ncu(args.ncu)
    if not args.no_ncu and ncu is None:
        print("fa2.profile: Nsight Compute (ncu) is not on PATH; pass --ncu PATH, or --no-ncu to measure the "
              "ceilings and times only", file=sys.stderr)
        return 2
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{runtime.describe()}\nncu: {ncu or '(not used)'}\nwriting to {args.out}", flush=True)

    ceilings = measure_ceilings(args.warmup_ms, args.rep_ms)
    write_ceilings(args.out / "profile_ceilings.csv", ceilings, args.command)
    for quantity, unit, value, _ in ceilings[:4]:
        print(f"ceiling {quantity:20s} {value:10.1f} {unit}", flush=True)

    cases = all_cases(args.studies)
    metrics_csv = Writer(args.out / "profile_metrics.csv", args.command)
    writers = {"kernels": metrics_csv, "decode": metrics_csv, "gluon": metrics_csv}
    if "configs" in args.studies:
        writers["configs"] = Writer(args.out / "profile_configs.csv", args.command)
    failed, unlaunchable = set(), set()
    for case in cases:
        print(f"timing {case.name()}", flush=True)
        try:
            for source, metric, unit, value in time_case(case, args.warmup_ms, args.rep_ms):
                writers[case.study].write(case, source, metric, unit, value)
                if metric.startswith("triton.required_"):             # over a limit: nothing to profile
                    unlaunchable.add(case)
        except Exception as error:   # a backend that cannot run here, a missing fa2.decode: record, go on
            message = f"{type(error).__name__}: {error}".strip().splitlines()[0][:300]
            print(f"  error: {message}", flush=True)
            writers[case.study].write(case, "error", "error", "", f"timing: {message}")
            failed.add(case)
        torch.cuda.empty_cache()

    if ncu:
        query = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
        available = parse_query_metrics(query.stdout)
        metrics = requested_metrics(available)
        print(f"ncu knows {len(available)} base metrics; requesting {len(metrics)} besides the sections "
              f"{', '.join(SECTIONS)}:\n  " + "\n  ".join(metrics), flush=True)
        skipped = sorted((set(n for names in METRICS.values() for n in names) | set(LOCAL_MEMORY)) - set(metrics))
        if skipped:
            print("  not known to this ncu (left to the sections, or not measured): " + ", ".join(skipped))
        with tempfile.TemporaryDirectory() as folder:
            for number, case in enumerate(cases):
                left = args.budget_s - (time.monotonic() - started)
                if case in failed or case in unlaunchable:
                    continue
                if left < 15:
                    writers[case.study].write(case, "error", "error", "", "ncu: skipped, --budget-s spent")
                    continue
                print(f"ncu {case.name()} ({left:.0f} s of the budget left)", flush=True)
                launches, error = ncu_profile(ncu, case, metrics, Path(folder) / f"case{number}",
                                              deadline=time.monotonic() + min(90.0, left))
                if error:
                    writers[case.study].write(case, "error", "error", "", error)
                    failed.add(case)
                for launch in launches:
                    for name, unit, value in measurements(launch):
                        writers[case.study].write(case, "ncu", name, unit, value, launch["launch"],
                                                  launch["kernel"][:200])
    for writer in set(writers.values()):
        writer.close()
    results = read_results(args.out / "profile_metrics.csv")
    if "configs" in args.studies:
        results += read_results(args.out / "profile_configs.csv")
    print_summary(results)
    print(f"\nwrote {', '.join(sorted(p.name for p in args.out.glob('profile_*.csv')))} in "
          f"{time.monotonic() - started:.0f} s")
    return 1 if any(case.study == "kernels" for case in failed) else 0


if __name__ == "__main__":
    sys.exit(main())
