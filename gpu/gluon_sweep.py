"""Tile configs of the Gluon Hopper rungs (fa2/gluon/attention_hopper.py), timed beside their peers on an H200.

    python gpu/gluon_sweep.py OUT [SECONDS] [NAME,...]   # OUT/gluon_sweep.csv, one row per (shape, provider)
    python gpu/gluon_sweep.py pick OUT [COUNT]           # the best COUNT configs as gluon_check.py check arguments

The headline sweep (fa2.bench.headline_sweep: (8, 32, 2048, 128) bf16 causal first, 10 shapes) with, per shape,
chapter 6's kernel (fa2.attention), SDPA FLASH and SDPA cuDNN, then every (rung, config) of CONFIGS; each output
is checked against SDPA FLASH's (fa2.bench.measure) before it is timed. Rows are written as they are measured, and
the sweep stops starting new shapes after SECONDS (default 200), so a time limit keeps what was done.

Why these configs: the Triton kernel's shipped table picks one warpgroup (4 warps) with 64- or 128-row query
tiles on the H200 (two or three programs per SM, whose softmax and matrix products interleave), while the rungs'
default is one 128-row program of 8 warps per SM. Shared memory per program (D = 128, bf16): Q 16 KB per 64
rows, each buffer of K and V 16 KB per 64 keys.
"""

import argparse
import csv
import math
import sys
import time
from pathlib import Path

# name: (rung, config)   m: BLOCK_M, n: BLOCK_N, b: K/V buffers, w: consumer warps
CONFIGS = {
    "r1_m64n64b2w4": (1, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    "r1_m128n64b2w4": (1, dict(BLOCK_M=128, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    "r1_m64n128b2w4": (1, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4)),
    "r2_m64n64b2w4": (2, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4)),
    "r2_m64n128b2w4": (2, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4)),
    "r3_m64n64b2w4": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128)),
    "r3_m64n128b2w4": (3, dict(BLOCK_M=64, BLOCK_N=128, NUM_BUFFERS=2, num_warps=4, maxnreg=128)),
    # rung 4: two 64-row consumer warpgroups and the producer in one 128-row program (12 warps)
    "r4": (4, {}),
    "r4_pingpong": (4, dict(PINGPONG=1)),
    "r4_n64b2": (4, dict(BLOCK_N=64)),
    "r4_n64b3_pingpong": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1)),
}


def providers(names):
    from fa2 import bench as fb
    from fa2.gluon.attention_hopper import attention_gluon

    def gluon(rung, config):
        return lambda shape: (lambda q, k, v: attention_gluon(q, k, v, shape.causal, rung=rung, config=config)[0])

    known = fb.all_providers()
    found = [known["fa2"], known["sdpa_flash"], known["sdpa_cudnn"]]
    for name in names:
        rung, config = CONFIGS[name]
        found.append(fb.Provider(f"gluon_{name}", f"Gluon rung {rung} {config}", gluon(rung, config)))
    return found


def main(out, seconds=200.0, names=None):
    from fa2 import bench as fb

    names = names or list(CONFIGS)
    args = argparse.Namespace(warmup_ms=25.0, rep_ms=100.0, command=f"python gpu/gluon_sweep.py OUT {seconds:g}")
    start = time.monotonic()
    path = Path(out) / "gluon_sweep.csv"
    rows = []
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=fb.COLUMNS, extrasaction="ignore")
        writer.writeheader()

        def write(row):
            writer.writerow(row)
            file.flush()
            rows.append(row)
            print(f"{row['provider']:22s} {row['B']}x{row['H']}x{row['N_Q']}x{row['D']} causal={row['causal']!s:5} "
                  f"{row['ms'] or '-':>9} ms {row['tflops'] or '-':>8} TFLOP/s {row['check']} {row['error'][:80]}",
                  flush=True)

        for shape in fb.headline_sweep():
            if time.monotonic() - start > seconds:
                print(f"stopped after {time.monotonic() - start:.0f} s: shapes left untimed", flush=True)
                break
            fb.run_sweep("gluon_sweep", [shape], providers(names), args, write)
    summary(rows)
    return 0 if all(row["check"] == "ok" for row in rows) else 1


def summary(rows):
    """Per shape: the best config's ms and its ratio to fa2 and cuDNN (ms ratios: above 1 = the rung is faster)."""
    table = {}
    for row in rows:
        table.setdefault((row["B"], row["H"], row["N_Q"], row["D"], row["causal"]), {})[row["provider"]] = row
    ms = lambda row: float(row["ms"]) if row and row["ms"] and row["check"] == "ok" else None
    for key, cells in table.items():
        rungs = {p: ms(r) for p, r in cells.items() if p.startswith("gluon_") and ms(r)}
        if not rungs:
            print(key, "no rung ran")
            continue
        best = min(rungs, key=rungs.get)
        fa2_ms, cudnn_ms = ms(cells.get("fa2")), ms(cells.get("sdpa_cudnn"))
        print(f"{key}: best {best} {rungs[best]:.4f} ms; fa2 {fa2_ms} (fa2/best {fa2_ms / rungs[best]:.3f}); "
              f"cuDNN {cudnn_ms} (cuDNN/best {cudnn_ms / rungs[best]:.3f})" if fa2_ms and cudnn_ms else
              f"{key}: best {best} {rungs[best]:.4f} ms")


def pick(out, count=2):
    """The `count` configs with the best geometric mean of fa2's time over theirs across the shapes where both
    passed, printed one per line as `RUNG KEY=VALUE ...` (gpu/gluon_check.py check's arguments)."""
    rows = list(csv.DictReader(open(Path(out) / "gluon_sweep.csv", newline="")))
    ms = {(r["provider"], r["B"], r["H"], r["N_Q"], r["D"], r["causal"]): float(r["ms"])
          for r in rows if r["check"] == "ok" and r["ms"]}
    scores = {}
    for name in CONFIGS:
        ratios = [ms[("fa2", *key[1:])] / value for key, value in ms.items()
                  if key[0] == f"gluon_{name}" and ("fa2", *key[1:]) in ms]
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
    sys.exit(main(sys.argv[1], float(sys.argv[2]) if len(sys.argv) > 2 else 200.0,
                  sys.argv[3].split(",") if len(sys.argv) > 3 else None))
