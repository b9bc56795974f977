"""The Gluon Hopper rungs (fa2/gluon/attention_hopper.py) on an H200: correctness, resources, time.

    python gpu/gluon_check.py check OUT RUNG [KEY=VALUE ...]  # one rung vs fp64 and SDPA: OUT/gluon_check_TAG.csv
    python gpu/gluon_check.py bench OUT NAME [KEY=VALUE ...]  # NAME = r1 .. r4 | peers: OUT/gluon_bench_TAG.csv
    python gpu/gluon_check.py summary OUT                     # joins the CSVs: OUT/gluon_check.csv, gluon_bench.csv

KEY=VALUE: a config override of the rung (``attention_hopper.rung_config``), e.g. ``bench OUT r4 BLOCK_N=64
PINGPONG=1``; values are ints (1/0 for flags); TAG is rRUNG plus the overrides (``r4_BLOCK_N64_PINGPONG1``),
also the provider's and the rows' name.

check: every rung over a dozen shapes (tiles and tails, GQA, N_Q != N_KV, rows with no visible key, one query,
one key) × D 64/128 × bf16/fp16 × causal/not, through ``fa2.testing.check_attention`` (the fp64 reference, the
derived error bounds, finite output, LSE, error <= 2x SDPA's + 1e-3) and, where SDPA's FLASH backend runs the
problem (N_Q == N_KV or not causal: FLASH's causal mask is top-left), error <= 2x FLASH's error vs fp64, with no
floor. A NaN fails. Also registers/spills (ptxas -v) and shared memory of every compiled kernel.

bench: (8, 32, 2048, 128) bf16 causal and the rest of the headline sweep (fa2.bench.headline_sweep, 10 shapes),
each provider checked against SDPA FLASH's output (fa2.bench.measure) and timed with fa2.testing.time_ms; ``peers``
is chapter 6's kernel through fa2.attention, SDPA FLASH and SDPA cuDNN.

One process per rung (a hang or a fault in one rung cannot take the others' rows with it). check exits 0 when
every check passed, 1 when some failed, 2 on a CUDA error (the context is lost: the rest is not run).
"""

import contextlib
import csv
import os
import sys
import traceback
from pathlib import Path

CHECK_SHAPES = [            # (B, Hq, Hkv, N_Q, N_KV)
    (2, 4, 4, 128, 128),    # whole tiles
    (2, 4, 4, 1000, 1000),  # tails
    (1, 8, 2, 1000, 1100),  # GQA, N_Q < N_KV
    (1, 4, 1, 1100, 1000),  # causal: the first 100 rows see no key
    (1, 2, 2, 1, 300),      # one query
    (1, 2, 2, 300, 1),      # one key
    (1, 2, 2, 77, 77),      # less than a tile
    (2, 2, 2, 257, 129),
    (1, 3, 3, 640, 640),
    (1, 2, 2, 130, 4000),   # many key tiles, one and a bit query tiles
    (4, 8, 8, 2048, 2048),
    (1, 4, 4, 4096, 4096),
]
# GLUON_CHECK_D=128 checks one head dim only (a probe's first look; every shipped config passed both)
CHECK_DS = tuple(int(d) for d in os.environ.get("GLUON_CHECK_D", "64,128").split(","))
CHECK_COLUMNS = ["rung", "config", "B", "Hq", "Hkv", "N_Q", "N_KV", "D", "dtype", "causal", "err", "sdpa_err",
                 "flash_err", "bound_used", "lse_bound_used", "check", "error"]
RESOURCE_COLUMNS = ["rung", "config", "D", "dtype", "causal", "registers", "spill_stores", "spill_loads", "stack",
                    "shared", "sass_registers", "setmaxnreg"]


def parse_config(items):
    """{'BLOCK_N': 64, 'PINGPONG': 1} of ['BLOCK_N=64', 'PINGPONG=1']."""
    config = {}
    for item in items:
        key, _, value = item.partition("=")
        if not key or not value:
            raise SystemExit(f"config overrides are KEY=VALUE, got {item!r}")
        config[key] = int(value)
    return config


def tag(rung, config):
    """rRUNG plus the overrides, as file and provider names: r4, r4_BLOCK_N64_PINGPONG1."""
    return "_".join([f"r{rung}"] + [f"{key}{value}" for key, value in config.items()])


def write_csv(path, rows, columns):
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def flash_error(q, k, v, causal, ref):
    """rel_err of SDPA FLASH vs the fp64 reference, or None where FLASH cannot run the problem the same way."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from fa2.testing import rel_err

    if causal and q.shape[2] != k.shape[2]:
        return None
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.shape[1] != k.shape[1])
    except RuntimeError:
        return None
    torch.cuda.synchronize()
    return rel_err(o, ref)


def check(out, rung, config=None):
    import torch

    from fa2.chapters.reference import attention_reference
    from fa2.gluon.attention_hopper import attention_gluon, compile_rung, resource_usage
    from fa2.testing import check_attention

    config = config or {}
    name, overrides = tag(rung, config), " ".join(f"{key}={value}" for key, value in config.items())
    rows, resources, failed = [], [], 0
    for D in CHECK_DS:
        for dtype in (torch.bfloat16, torch.float16):
            for causal in (False, True):
                usage = resource_usage(compile_rung(rung, D, dtype, causal, config=config))
                resources.append(dict(rung=rung, config=overrides, D=D, dtype=str(dtype)[6:], causal=causal,
                                      **usage))
                print(resources[-1], flush=True)
                for B, Hq, Hkv, Nq, Nk in CHECK_SHAPES:
                    row = dict(rung=rung, config=overrides, B=B, Hq=Hq, Hkv=Hkv, N_Q=Nq, N_KV=Nk, D=D,
                               dtype=str(dtype)[6:], causal=causal)
                    captured = {}

                    def fn(q, k, v, causal, scale):
                        captured.update(q=q, k=k, v=v)
                        # named before the launch and synchronised: a hang's log ends with its shape
                        print(f"running {name} {B}x{Hq}/{Hkv}x{Nq}x{Nk} D={D} {str(dtype)[6:]} causal={causal}",
                              flush=True)
                        result = attention_gluon(q, k, v, causal, scale, rung=rung, config=config)
                        torch.cuda.synchronize()
                        return result

                    try:
                        row.update(check_attention(fn, B, Hq, Hkv, Nq, Nk, D, dtype, causal), check="ok")
                        q, k, v = captured["q"], captured["k"], captured["v"]
                        ref = attention_reference(q, k, v, causal)
                        flash = flash_error(q, k, v, causal, ref)
                        if flash is not None:
                            row["flash_err"] = flash
                            assert row["err"] <= 2 * flash, f"error {row['err']:.2e} > 2x FLASH's {flash:.2e}"
                    except Exception as exc:
                        failed += 1
                        row.update(check="fail" if isinstance(exc, AssertionError) else "error",
                                   error=f"{type(exc).__name__}: {exc}"[:300])
                        traceback.print_exc()
                    rows.append(row)
                    print({key: row.get(key) for key in ("N_Q", "N_KV", "D", "dtype", "causal", "err",
                                                         "flash_err", "check")}, flush=True)
                    # rewritten after every row: a hang killed by the time limit keeps the rows before it
                    write_csv(Path(out) / f"gluon_check_{name}.csv", rows, CHECK_COLUMNS)
                    write_csv(Path(out) / f"gluon_resources_{name}.csv", resources, RESOURCE_COLUMNS)
                    if row["check"] == "error" and "CUDA" in row.get("error", ""):   # a fault poisons the context
                        return 2
    print(f"{name}: {len(rows) - failed}/{len(rows)} ok")
    return 1 if failed else 0


def gluon_provider(name, rung, config, label):
    """A fa2.bench provider (named gluon_NAME) that runs the Gluon kernel with this rung and config the way
    fa2.attention runs a dispatched call: through a fa2.plan.GluonPlan made on the first call of a shape (later
    calls go straight to the compiled launcher). Runs before session 7 called attention_gluon, whose JIT path adds
    0.1-0.2 ms of host time a call on the H200 machine: at small shapes their Gluon times are host time."""
    from fa2 import bench as fb
    from fa2.plan import GluonPlan
    from fa2.validate import softmax_scale

    def build(shape):
        plans = {}

        def run(q, k, v):
            if "plan" not in plans:
                plans["plan"] = GluonPlan(q, k, v, shape.causal, softmax_scale(q.shape[-1], None),
                                          (rung, dict(config or {})))
            return plans["plan"](q, k, v)[0]
        return run
    return fb.Provider(f"gluon_{name}", label, build)


@contextlib.contextmanager
def row_writer(path, width=12):
    """write(row): one fa2.bench row into the CSV at `path` (flushed: a run killed at its time limit keeps the rows
    before it) and a line of it on stdout, the provider's name `width` wide."""
    from fa2 import bench as fb

    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fb.COLUMNS, extrasaction="ignore")
        writer.writeheader()

        def write(row):
            writer.writerow(row)
            file.flush()
            print(f"{row['provider']:{width}s} {row['B']}x{row['H']}x{row['N_Q']}x{row['D']} "
                  f"causal={row['causal']!s:5} {row['dtype']} {row['ms'] or '-':>9} ms {row['tflops'] or '-':>8} "
                  f"TFLOP/s {row['check']} {row['error'][:80]}", flush=True)
        yield write


def bench(out, name, config=None):
    import argparse

    from fa2 import bench as fb

    if name == "peers":
        known = fb.all_providers()
        providers = [known["fa2"], known["sdpa_flash"], known["sdpa_cudnn"]]
    else:
        rung, config = int(name[1:]), config or {}
        name = tag(rung, config)
        providers = [gluon_provider(name, rung, config, f"Gluon Hopper rung {rung} {config or ''}".strip())]
    shapes = fb.headline_sweep()          # 5 (B, N, H, D) x causal: (8, 32, 2048, 128) bf16 causal is the first
    args = argparse.Namespace(warmup_ms=25.0, rep_ms=100.0, command=f"python gpu/gluon_check.py bench OUT {name}")
    with row_writer(Path(out) / f"gluon_bench_{name}.csv") as write:
        rows = fb.run_sweep("gluon", shapes, providers, args, write)
    return 0 if all(row["check"] == "ok" for row in rows) else 1


def summary(out):
    out = Path(out)
    for stem in ("gluon_check", "gluon_resources", "gluon_bench"):
        parts = sorted(p for p in out.glob(f"{stem}_*.csv"))
        rows = [row for p in parts for row in csv.DictReader(open(p, newline=""))]
        if not rows:
            continue
        write_csv(out / f"{stem}.csv", rows, list(rows[0]))
        if stem == "gluon_check":
            bad = [r for r in rows if r["check"] != "ok"]
            print(f"correctness: {len(rows) - len(bad)}/{len(rows)} ok" + "".join(
                f"\n  r{r['rung']} {r['B']}x{r['Hq']}/{r['Hkv']}x{r['N_Q']}x{r['N_KV']} D={r['D']} {r['dtype']} "
                f"causal={r['causal']}: {r['check']} {r['error']}" for r in bad[:20]))
        if stem == "gluon_resources":
            for r in rows:
                print(f"r{r['rung']} {r.get('config') or ''} D={r['D']} {r['dtype']} causal={r['causal']}: "
                      f"{r['registers']} regs (SASS {r.get('sass_registers')}, setmaxnreg {r.get('setmaxnreg')}), "
                      f"spills {r['spill_stores']}/{r['spill_loads']} B, smem {r['shared']} B")
        if stem == "gluon_bench":
            table = {}
            for r in rows:
                table.setdefault((r["B"], r["H"], r["N_Q"], r["D"], r["causal"]), {})[r["provider"]] = r
            names = list(dict.fromkeys(r["provider"] for r in rows))
            print("shape (B, H, N, D, causal) | " + " | ".join(names) + " | cuDNN / best rung | fa2 / best rung (ms ratios)")
            for key, cells in table.items():
                ms = lambda p: float(cells[p]["ms"]) if p in cells and cells[p]["ms"] else None
                rungs = [ms(p) for p in names if p.startswith("gluon") and ms(p) and cells[p]["check"] == "ok"]
                ratio = lambda p: f"{ms(p) / min(rungs):.3f}" if rungs and ms(p) else "-"
                print(f"{key} | " + " | ".join(f"{ms(p):.4f}" if ms(p) else "-" for p in names)
                      + f" | {ratio('sdpa_cudnn')} | {ratio('fa2')}")
    return 0


if __name__ == "__main__":
    command, out = sys.argv[1], sys.argv[2]
    if command == "check":
        sys.exit(check(out, int(sys.argv[3]), parse_config(sys.argv[4:])))
    if command == "bench":
        sys.exit(bench(out, sys.argv[3], parse_config(sys.argv[4:])))
    sys.exit(summary(out))
