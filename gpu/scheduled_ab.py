"""Does a host-planned list schedule (the Gluon kernel's SCHEDULED option, attention_hopper.schedule_table) make
the persistent rung-4 kernel faster than round-robin units or one program per tile? (An H200.)

    python gpu/scheduled_ab.py OUT [ROUNDS] [WINDOW_NAMES] [CAUSAL_NAMES] [CSV_NAME]
                                        # OUT/scheduled_ab.csv: one row per (problem, round, provider)

1. The window problem of fa2.bench_dropin (B=1, H=16, N=32768, D=128, bf16, causal, window (4096, 0), on the
   sweep's (B, N, H, D) memory): fa2.attention (the shipped window family's choice), the Gluon configs of WINDOW
   through a GluonPlan, FlexAttention with its sliding-window block mask.
2. Chapter 6's causal headline shapes: fa2.attention, the persistent configs of CAUSAL (paired units, or
   SCHEDULED) through a GluonPlan, SDPA's cuDNN backend.

Every provider's output is compared with fa2.attention's first (rel_err <= 2e-2, else the row says "fail"); each
problem's providers are timed in ROUNDS interleaved rounds (fa2.bench.interleaved_rounds; default 5) with
fa2.testing.time_ms. The correctness of the configs against fp64 is gpu/gluon_check.py's and
gpu/gluon_window.py's (gpu/scheduled.sh runs them first).
"""

import csv
import statistics
import sys
from pathlib import Path

import torch

import fa2
from fa2 import bench as fb
from fa2 import bench_dropin as bd
from fa2.gluon.candidates import CONFIGS
from fa2.plan import GluonPlan
from fa2.testing import rel_err, time_ms

WINDOW = ("r4_n128b2_pingpong", "r4_n128b2_pingpong_persistent", "r4_n128b2_pingpong_scheduled",
          "r4_n64b3_pingpong", "r4_n64b3_pingpong_scheduled")
CAUSAL = ("r4_n64b3_pingpong_persistent", "r4_n64b3_pingpong_scheduled", "r4_n128b2_pingpong_persistent",
          "r4_n128b2_pingpong_scheduled")
HEADLINE_CAUSAL = [(8, 32, 2048, 128), (1, 32, 8192, 128), (32, 32, 512, 128), (8, 16, 2048, 64),
                   (1, 16, 16384, 64)]


def plan_fn(q, k, v, name, window_left=-1):
    rung, config = CONFIGS[name]
    plan = GluonPlan(q, k, v, True, q.shape[-1] ** -0.5, (rung, dict(config)), window_left=window_left)
    return lambda: plan(q, k, v)[0]


def timed(writer, label, fns, reference, rounds, command):
    """fns {name: fn() -> o}: check each against `reference`, then time the ones that pass in rounds."""
    names, timers, errors = [], [], {}
    for name, fn in fns.items():
        try:
            err = rel_err(fn(), reference)
            if not err <= 2e-2:
                raise AssertionError(f"rel_err {err:.2e}")
        except Exception as error:
            errors[name] = f"{type(error).__name__}: {error}"[:200]
            print(f"{label} {name}: {errors[name]}", flush=True)
            continue
        names.append(name)
        timers.append(lambda fn=fn: time_ms(fn))
    results, failed = fb.interleaved_rounds(timers, rounds)
    for name, found, error in zip(names, results, failed):
        for r, ms in enumerate(found):
            writer.writerow([label, name, r, f"{ms:.5f}", "ok", torch.cuda.get_device_name(), torch.__version__,
                             command])
        median = statistics.median(found) if found else float("nan")
        print(f"{label:36s} {name:34s} {median:8.4f} ms  rounds {' '.join(f'{t:.4f}' for t in found)} {error}",
              flush=True)
    for name, error in errors.items():
        writer.writerow([label, name, "", "", f"fail: {error}", torch.cuda.get_device_name(), torch.__version__,
                         command])


def main(out, rounds=5, window=WINDOW, causal=CAUSAL, csv_name="scheduled_ab.csv"):
    command = " ".join(["python gpu/scheduled_ab.py OUT", str(rounds), *sys.argv[3:]])
    with open(Path(out) / csv_name, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["problem", "provider", "round", "ms", "check", "device", "torch", "command"])
        problem = bd.window_problems()[0]
        x = bd.make_inputs(problem, torch.Generator("cuda").manual_seed(0))
        q, k, v = x.bhnd
        left = problem.window[0]
        reference = fa2.attention(q, k, v, causal=True, window=problem.window)
        fns = {"fa2": lambda: fa2.attention(q, k, v, causal=True, window=problem.window)}
        fns.update({f"gluon_{n}": plan_fn(q, k, v, n, left) for n in window})
        flex, unpack = bd.build_flex(problem, x)
        fns["flex"] = lambda: unpack(flex()).unflatten(0, (1, -1)).transpose(1, 2)
        timed(writer, problem.name(), fns, reference, rounds, command)
        file.flush()
        del x, q, k, v, reference, fns, flex
        torch.cuda.empty_cache()

        cudnn = fb.all_providers()["sdpa_cudnn"]
        for B, H, N, D in HEADLINE_CAUSAL:
            q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
            reference = fa2.attention(q, k, v, causal=True)
            fns = {"fa2": lambda: fa2.attention(q, k, v, causal=True)}
            fns.update({f"gluon_{n}": plan_fn(q, k, v, n) for n in causal})
            with cudnn.context():
                run = cudnn.build(fb.Shape(B=B, H=H, Hkv=H, N=N, D=D, dtype="bf16", causal=True))

            def sdpa_cudnn(run=run):
                with cudnn.context():
                    return run(q, k, v)
            fns["sdpa_cudnn"] = sdpa_cudnn
            timed(writer, f"({B}, {H}, {N}, {D}) bf16 causal", fns, reference, rounds, command)
            file.flush()
    return 0


if __name__ == "__main__":
    names = lambda i, default: sys.argv[i].split(",") if len(sys.argv) > i and sys.argv[i] else default
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5, names(3, WINDOW), names(4, CAUSAL),
                  sys.argv[5] if len(sys.argv) > 5 else "scheduled_ab.csv"))
