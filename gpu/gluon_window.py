"""The Gluon kernel with a sliding window (chapter 12's rungs, WINDOW): checked against fp64, then timed on the
window sweep's problem beside chapter 10's kernel, FlexAttention and plain causal attention (an H200).

    python gpu/gluon_window.py OUT [SECONDS] [NAME,...]   # OUT/gluon_window_check.csv, OUT/gluon_window.csv

1. Every (rung, config) of CONFIGS over CASES: causal with window_left in {0, 1, 37, 64, 127, 128, 300, 1000},
   N_Q = N_KV and not, tails, GQA, fp16 and bf16, through fa2.testing.check_attention (fp64 reference, the
   derived error bounds, and at most twice SDPA's error on the same window mask). A config with any failure is
   not timed.
2. B=1, H=16, N=32768, D=128, bf16, causal, window (4096, 0) -- the issue's window problem -- and the same
   problem without the window: each checked config (window) and fa2.attention (window: chapter 10's kernel;
   plain: whatever fa2.attention runs), FlexAttention with a sliding-window block mask, all in one process.
   TFLOP/s on visible scores (fa2.bench_dropin's count).

    python gpu/gluon_window.py sweep OUT [SECONDS] [NAME,...]   # OUT/gluon_window_sweep.csv

The window families of the Gluon table (`python -m fa2.gluon.dispatch --windows CSV TABLE`): every problem of
SWEEP (D 64/128, fp16/bf16, causal, window (left, 0)) with chapter 10's kernel (fa2_ch10, what windowed calls ran
before) and each named config launched through a GluonPlan (default: the configs that passed step 1 above in an
earlier run), each output checked against fp64 on row blocks at the start, middle and end (fa2.bench_dropin), then
timed. Stops starting new problems after SECONDS (default 150).
"""

import csv
import sys
import time
from pathlib import Path

import torch

from fa2.gluon.candidates import CONFIGS as CANDIDATES    # plain data: importing it needs no Gluon

# the table's candidates, then a variant that is not one (timed here to see what a window makes of it)
CONFIGS = {name: CANDIDATES[name] for name in ("r1_m128n64b2w4", "r1_m64n128b2w4", "r4_n64b3_pingpong",
                                               "r4_n128b2_pingpong", "r4_n64b3_pingpong_persistent",
                                               "r4_n64b3_pingpong_scheduled", "r4_n128b2_pingpong_scheduled",
                                               "r4_n64b3_pingpong_own", "r4_n64b3_pingpong_persistent_own",
                                               "r4_n64b3_pingpong_scheduled_own")}
CONFIGS["r4_n64b2_pingpong_persistent"] = (4, dict(CANDIDATES["r4_n64b3_pingpong_persistent"][1], NUM_BUFFERS=2))
# (B, Hq, Hkv, N_Q, N_KV, D, dtype, window_left)
CASES = [(2, 4, 4, 300, 300, 128, torch.bfloat16, w) for w in (0, 1, 37, 64, 127, 128, 300, 1000)] + [
    (1, 4, 4, 1000, 1100, 128, torch.float16, 200), (1, 4, 4, 257, 129, 64, torch.bfloat16, 50),
    (2, 8, 2, 640, 640, 128, torch.bfloat16, 256), (1, 2, 2, 4096, 4096, 64, torch.float16, 1024)]


def check(out, seconds, names=None):
    from fa2.gluon.attention_hopper import attention_gluon
    from fa2.testing import check_attention

    passed, rows, start = set(), [], time.perf_counter()
    known = dict(CANDIDATES, **CONFIGS)                  # a named candidate need not be one of CONFIGS
    for name in names or list(CONFIGS):
        rung, config = known[name]
        ok = True
        for B, Hq, Hkv, nq, nk, D, dtype, left in CASES:
            if time.perf_counter() - start > seconds:
                ok = False
                break
            fn = lambda q, k, v, causal, scale, window: attention_gluon(q, k, v, causal, scale, rung=rung,
                                                                         config=config, window_left=window[0])
            try:
                result = check_attention(fn, B, Hq, Hkv, nq, nk, D, dtype, True, window=(left, 0))
                status, err = "ok", result["err"]
            except Exception as error:                 # an assertion (bounds) or a launch error
                status, err, ok = f"fail: {type(error).__name__}: {str(error)[:120]}", float("nan"), False
            rows.append(dict(config=name, B=B, Hq=Hq, Hkv=Hkv, N_Q=nq, N_KV=nk, D=D, dtype=str(dtype)[6:],
                             window_left=left, check=status, err=f"{err:.2e}"))
            print(f"{name:20s} {(B, Hq, Hkv, nq, nk, D, str(dtype)[6:], left)}: {status} {err:.1e}", flush=True)
        if ok:
            passed.add(name)
    with open(Path(out) / "gluon_window_check.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return passed


def timing(out, passed):
    from fa2 import bench_dropin as bd
    from fa2.gluon.attention_hopper import attention_gluon
    from fa2.testing import time_ms

    problems = bd.window_problems()                       # (window (4096, 0), plain causal), N = 32768
    rows = []
    for problem in problems:
        x = bd.make_inputs(problem, torch.Generator("cuda").manual_seed(0))
        q, k, v = x.bhnd
        left = -1 if problem.window is None else problem.window[0]
        fns = {"fa2": lambda: fa2_call(q, k, v, problem.window)}
        if left >= 0:
            for name in sorted(passed):
                rung, config = dict(CANDIDATES, **CONFIGS)[name]     # a named candidate need not be one of CONFIGS
                fns[f"gluon_{name}"] = (lambda rung=rung, config=config: attention_gluon(
                    q, k, v, True, None, rung=rung, config=config, window_left=left))
            fns["flex"] = bd.build_flex(problem, x)[0]
        for name, fn in fns.items():
            fn()
            ms = time_ms(fn)
            rows.append(dict(problem=problem.name(), provider=name, ms=f"{ms:.5g}",
                             tflops=f"{problem.tflops(ms):.5g}"))
            print(f"{problem.name():50s} {name:24s} {ms:8.4f} ms {problem.tflops(ms):7.1f} TFLOP/s", flush=True)
    with open(Path(out) / "gluon_window.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def fa2_call(q, k, v, window):
    import fa2
    return fa2.attention(q, k, v, causal=True, window=window)


# (B, H, N, window left) x D x dtype: the window problem of the issue (1, 16, 32768, 4096) and shapes around it
SWEEP = [(1, 16, 32768, 4096), (1, 16, 32768, 1024), (4, 16, 8192, 2048), (4, 16, 8192, 512)]
SWEEP_CONFIGS = ("r4_n64b3_pingpong", "r4_n128b2_pingpong", "r1_m128n64b2w4")


def sweep(out, seconds, names):
    from fa2 import bench_dropin as bd
    from fa2.plan import GluonPlan
    from fa2.varlen import attention_masked

    bhnd_out = lambda o: o.transpose(1, 2).flatten(0, 1)          # (B, H, N, D) -> packed (B·N, H, D)

    def chapter10(problem, x):
        q, k, v = x.bhnd
        return (lambda: attention_masked(q, k, v, True, q.shape[-1] ** -0.5, problem.window[0], 0, 0.0)[0],
                bhnd_out)

    def gluon(rung, config):
        def build(problem, x):
            q, k, v = x.bhnd
            plan = GluonPlan(q, k, v, True, q.shape[-1] ** -0.5, (rung, dict(config)), problem.window[0])
            return (lambda: plan(q, k, v)[0]), bhnd_out
        return build

    providers = [bd.Provider("fa2_ch10", "chapter 10's kernel", chapter10)] + [
        bd.Provider(f"gluon_{name}", f"Gluon {name}", gluon(*CONFIGS[name])) for name in names]
    command = f"python gpu/gluon_window.py sweep OUT {seconds:g} {','.join(names)}"
    environment = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                   "triton": __import__("triton").__version__, "command": command}
    start, rows = time.perf_counter(), []
    path = Path(out) / "gluon_window_sweep.csv"
    columns = ["D", "dtype", "B", "H", "N", "window_left", "provider", "ms", "tflops", "rel_err", "check", "error",
               "device", "torch", "triton", "command"]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        for D in (128, 64):
            for dtype in ("bf16", "fp16"):
                for B, H, N, left in SWEEP:
                    if time.perf_counter() - start > seconds:
                        print("time's up: problems left untimed", flush=True)
                        return rows
                    problem = bd.Problem("window", (N,) * B, Hq=H, Hkv=H, D=D, dtype=dtype, window=(left, 0))
                    x = bd.make_inputs(problem, torch.Generator("cuda").manual_seed(0))
                    ref_rows, ref = bd.reference(problem, x)
                    for provider in providers:
                        row = dict(D=D, dtype=dtype, B=B, H=H, N=N, window_left=left, **environment,
                                   **bd.measure(provider, problem, x, ref_rows, ref, 100.0))
                        writer.writerow(row)
                        f.flush()
                        rows.append(row)
                        print(f"D={D} {dtype} B={B} H={H} N={N} left={left} {provider.name:26s} "
                              f"{row.get('ms', ''):>9s} ms {row['check']} {row.get('rel_err', '')} {row['error']}",
                              flush=True)
                    del x, ref
                    torch.cuda.empty_cache()
    return rows


if __name__ == "__main__" and sys.argv[1] == "sweep":
    out = Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    rows = sweep(out, float(sys.argv[3]) if len(sys.argv) > 3 else 150.0,
                 sys.argv[4].split(",") if len(sys.argv) > 4 else list(SWEEP_CONFIGS))
    sys.exit(0 if rows and all(row["check"] == "ok" for row in rows) else 1)
elif __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    passed = check(out, float(sys.argv[2]) if len(sys.argv) > 2 else 150.0,
                   sys.argv[3].split(",") if len(sys.argv) > 3 else None)
    print("passed every case:", sorted(passed), flush=True)
    if len(sys.argv) <= 3:                 # named candidates are only checked here (gpu/money_ab.py times them)
        timing(out, passed)
