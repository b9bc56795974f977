"""Tile configs of the Gluon Hopper rungs (fa2/gluon/attention_hopper.py), timed beside their peers on an H200.

    python gpu/gluon_sweep.py OUT [SECONDS] [NAME,...] [SWEEP] [PEERS]  # a row per (shape, provider), see below
    python gpu/gluon_sweep.py pick OUT [COUNT]       # the best COUNT configs as gluon_check.py check arguments

SWEEP (default headline: fa2.bench.headline_sweep, (8, 32, 2048, 128) bf16 causal first, 10 shapes; or
reference, the 96 shapes of fa2.bench.reference_sweep) with, per shape, the PEERS (default fa2_ch6,sdpa_flash,sdpa_cudnn:
chapter 6's kernel with the Gluon dispatch off -- the table builder's baseline -- and SDPA's two backends), then every (rung, config) of NAMES (default: all
of CONFIGS); each output is checked against SDPA FLASH's (fa2.bench.measure) before it is timed. Rows are written
as they are measured (OUT/gluon_sweep.csv for the headline sweep, OUT/gluon_reference.csv for the reference one),
and the sweep stops starting new shapes after SECONDS (default 200), so a time limit keeps what was done.

The configs and why they were chosen: fa2/gluon/candidates.py.
"""

import argparse
import csv
import math
import sys
import time
from pathlib import Path

from fa2.gluon.candidates import CONFIGS   # name: (rung, config)
from gluon_check import gluon_provider, row_writer   # gpu/gluon_check.py: this script's folder is on sys.path


def providers(names, peers=("fa2_ch6", "sdpa_flash", "sdpa_cudnn")):
    from fa2 import bench as fb

    known = fb.all_providers()
    return [known[name] for name in peers] + [
        gluon_provider(name, *CONFIGS[name], f"Gluon rung {CONFIGS[name][0]} {CONFIGS[name][1]}") for name in names]


def main(out, seconds=200.0, names=None, sweep="headline", peers=("fa2_ch6", "sdpa_flash", "sdpa_cudnn")):
    from fa2 import bench as fb

    names = names or list(CONFIGS)
    shapes = {"headline": fb.headline_sweep, "reference": fb.reference_sweep}[sweep]()
    shapes = sorted(shapes, key=lambda shape: shape.dtype != "bf16")   # bf16 first: a cut-short run keeps it
    args = argparse.Namespace(warmup_ms=25.0, rep_ms=100.0 if sweep == "headline" else 50.0,
                              command=f"python gpu/gluon_sweep.py OUT {seconds:g} {','.join(names)} {sweep} "
                                      f"{','.join(peers)}")
    start = time.monotonic()
    path = Path(out) / ("gluon_sweep.csv" if sweep == "headline" else f"gluon_{sweep}.csv")
    rows, timed = [], providers(names, peers)
    with row_writer(path, width=22) as write_row:
        def write(row):
            write_row(row)
            rows.append(row)

        for shape in shapes:
            if time.monotonic() - start > seconds:
                print(f"stopped after {time.monotonic() - start:.0f} s: shapes left untimed", flush=True)
                break
            fb.run_sweep(f"gluon_{sweep}", [shape], timed, args, write)
    summary(rows)
    return 0 if all(row["check"] == "ok" for row in rows) else 1


def summary(rows):
    """Per shape: the best config's ms and its ratio to fa2 and cuDNN (ms ratios: above 1 = the rung is faster)."""
    table = {}
    for row in rows:
        table.setdefault((row["B"], row["H"], row["N_Q"], row["D"], row["causal"], row["dtype"]), {})[
            row["provider"]] = row
    ms = lambda row: float(row["ms"]) if row and row["ms"] and row["check"] == "ok" else None
    for key, cells in table.items():
        rungs = {p: ms(r) for p, r in cells.items() if p.startswith("gluon_") and ms(r)}
        if not rungs:
            print(key, "no rung ran")
            continue
        best = min(rungs, key=rungs.get)
        line = f"{key}: best {best} {rungs[best]:.4f} ms"
        for peer in ("fa2_ch6", "fa2", "sdpa_cudnn"):
            if ms(cells.get(peer)):
                line += f"; {peer} {ms(cells[peer])} ({peer}/best {ms(cells[peer]) / rungs[best]:.3f})"
        print(line)


def pick(out, count=2):
    """The `count` configs with the best geometric mean of fa2's time over theirs across the shapes where both
    passed, printed one per line as `RUNG KEY=VALUE ...` (gpu/gluon_check.py check's arguments)."""
    rows = list(csv.DictReader(open(Path(out) / "gluon_sweep.csv", newline="")))
    ms = {(r["provider"], r["B"], r["H"], r["N_Q"], r["D"], r["causal"]): float(r["ms"])
          for r in rows if r["check"] == "ok" and r["ms"]}
    scores = {}
    base = "fa2_ch6" if any(key[0] == "fa2_ch6" for key in ms) else "fa2"   # chapter 6's kernel (older runs: fa2)
    for name in CONFIGS:
        ratios = [ms[(base, *key[1:])] / value for key, value in ms.items()
                  if key[0] == f"gluon_{name}" and (base, *key[1:]) in ms]
        if ratios:
            scores[name] = (math.exp(sum(map(math.log, ratios)) / len(ratios)), len(ratios))
    for name, (score, n) in sorted(scores.items(), key=lambda item: -item[1][0]):
        print(f"# {name}: fa2 time / its time, geometric mean over {n} shapes: {score:.3f}", file=sys.stderr)
    for name in sorted(scores, key=lambda name: -scores[name][0])[:count]:
        rung, config = CONFIGS[name]
        print(rung, *[f"{key}={int(value)}" for key, value in config.items()])


if __name__ == "__main__":
    if sys.argv[1] == "pick":
        sys.exit(pick(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2))
    argv = sys.argv[1:] + [""] * 5
    sys.exit(main(argv[0], float(argv[1] or 200.0), argv[2].split(",") if argv[2] else None, argv[3] or "headline",
                  tuple(argv[4].split(",")) if argv[4] else ("fa2_ch6", "sdpa_flash", "sdpa_cudnn")))
