"""Tune chapter 10's kernel on this GPU and write its table, fa2/configs/<GPU name>.varlen.json.

`python -m fa2.tune --kernel varlen` (needs a CUDA GPU).

For each case (the two benchmark problems of `fa2.bench_dropin` first, then a few more lengths and windows) it
builds the inputs once, and for every pruned candidate (`fa2.varlen_configs.candidates`):

1. runs it and compares its output with the fp64 reference (every row of a packed batch; three blocks of 256
   rows of a long window problem, as the benchmark checks) and, on every row, with the output of the fixed
   config the kernel used before it had a table: NaN or a relative error of 1e-2 or more rules it out;
2. times the ones that pass from a CUDA graph (`fa2.testing.time_ms(cuda_graph=True)`, GPU time only).

The fastest of each key is then checked once more, on ragged sequences (lengths 0, 1 and around tile
multiples, GQA) with its key's mask, through both the TMA and the pointer loads, against fp64
(`fa2.testing.check_varlen`). Only a config that passed everything is written under "configs"; a winner that
fails gives way to the next fastest. Every candidate's time and error is kept under "candidates".

    python -m fa2.tune --kernel varlen                         # every case, a new table (about 3 min on an H200)
    python -m fa2.tune --kernel varlen --cases bench --jobs 16 --budget-s 120

Compiling is CPU work: with --jobs N every (case, candidate) binary is compiled first in N processes (the
timing process then finds them in Triton's cache). --budget-s stops starting new cases once that many seconds
have passed; the table then holds the cases finished.
"""

import argparse
import json
import multiprocessing
import os
import sys
import time

import torch

from fa2 import runtime
from fa2.bench_dropin import Problem, make_inputs, reference, varlen_lengths
from fa2.chapters.varlen import attention_varlen_forward, attention_window_forward
from fa2.testing import check_varlen, rel_err, time_ms
from fa2.varlen_configs import candidates, fixed_config, table_file_name, tuning_key

REL_TOL = 1e-2
BENCH_LENGTHS = varlen_lengths()                              # the varlen sweep's 16 sequences, 516..3890
CASES = {   # name -> problem; "bench" holds the two benchmark problems, "more" the others
    "bench": [Problem("varlen", BENCH_LENGTHS),                                     # causal/q4096/k4096
              Problem("window", (32768,), Hq=16, Hkv=16, window=(4096, 0))],      # window/q32768/k4096
    "more": [Problem("varlen", BENCH_LENGTHS, causal=False),                       # full/q4096/k4096
             Problem("window", (32768,), Hq=16, Hkv=16, window=(1024, 0)),         # window/q32768/k1024
             Problem("window", (8192,) * 4, Hq=16, Hkv=16, window=(4096, 0)),      # window/q8192/k4096
             Problem("varlen", varlen_lengths(32, 64, 1024))],                     # causal/q1024/k1024
}
CASE_SETS = tuple(CASES)
# the ragged check of a winner: lengths 0, 1, around 128-row tiles, GQA 8/2, per mask (causal, window) pairs
RAGGED_Q = [1, 0, 127, 128, 129, 300, 1000]
RAGGED_K = [1, 5, 127, 200, 129, 300, 640]
RAGGED_MASKS = {"full": [(False, None)], "causal": [(True, None)],
                "window": [(True, (100, -1)), (False, (33, 70)), (True, (5, 0))]}


def problem_key(problem):
    n = max(problem.lengths)
    return tuning_key(problem.D, getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[problem.dtype]),
                      problem.causal, problem.window, n, n)


def runner(problem, x):
    """run(cfg) -> o as (total, Hq, D): the kernel with that config on the problem's inputs (the window sweep's
    problems through (B, H, N, D) views, as fa2.attention calls it)."""
    if problem.sweep == "varlen":
        return lambda cfg: attention_varlen_forward(x.q, x.k, x.v, x.cu_seqlens, x.cu_seqlens, x.max_seqlen,
                                                    x.max_seqlen, problem.causal, None, problem.window, None,
                                                    cfg)[0]
    q, k, v = x.bhnd
    return lambda cfg: attention_window_forward(q, k, v, problem.causal, None, problem.window, None,
                                                cfg)[0].transpose(1, 2).flatten(0, 1)


def ragged_check(cfg, mask, dtype=torch.bfloat16, D=128):
    """check_varlen on ragged sequences with this config, every (causal, window) of the mask, TMA and pointer
    loads. Returns None if all passed, else the first failure's text."""
    try:
        for tma in (True, False):
            fn = lambda *a, **kw: attention_varlen_forward(*a, config=cfg, tma=tma, **kw)
            for causal, window in RAGGED_MASKS[mask]:
                check_varlen(fn, RAGGED_Q, RAGGED_K, 8, 2, D, dtype, causal, window=window,
                             generator=torch.Generator(runtime.DEVICE).manual_seed(0))
        torch.cuda.synchronize()
    except Exception as exc:                # AssertionError from the check, or a launch failure
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
    return None


def _worker(job):
    """A pool job: ("compile", problem, cfg) runs the case once with cfg (so the binary lands in Triton's
    on-disk cache); ("ragged", cfg, mask, dtype, D) runs ragged_check. Returns an error text or None."""
    if job[0] == "ragged":
        return ragged_check(*job[1:])
    _, problem, cfg = job
    try:
        x = make_inputs(problem, torch.Generator("cuda").manual_seed(0))
        runner(problem, x)(cfg)
        torch.cuda.synchronize()
    except Exception as exc:                # the timing process meets it again and records it
        return type(exc).__name__
    return None


def in_pool(jobs, workers):
    """Results of `_worker` over jobs, in order, from `workers` spawned processes (or here if workers <= 1)."""
    if workers <= 1 or len(jobs) <= 1:
        return [_worker(job) for job in jobs]
    with multiprocessing.get_context("spawn").Pool(min(workers, len(jobs))) as pool:
        return pool.map(_worker, jobs, chunksize=1)


def compile_jobs(problems, candidates_of):
    """One compile job per binary: a binary depends on the kernel's flags, dtype, head dim, config and whether
    the lengths are multiples of 16 (Triton specialises on it), not on the values."""
    jobs, seen = [], set()
    for problem in problems:
        for cfg in [None] + candidates_of[problem.D]:
            cfg = cfg or fixed_config(problem.D)
            binary = (problem.sweep, problem.D, problem.dtype, problem.causal, problem.window is None,
                      all(n % 16 == 0 for n in problem.lengths), tuple(sorted(cfg.items())))
            if binary not in seen:
                seen.add(binary)
                jobs.append(("compile", problem, cfg))
    return jobs


def measure(problem, cands, rep_ms):
    """Check every candidate against fp64 (reference rows) and the fixed config (every row), time the ones
    that pass: a list of {cfg, ok, rel_err, rel_err_fixed, ms}."""
    x = make_inputs(problem, torch.Generator("cuda").manual_seed(0))
    rows, ref = reference(problem, x)
    run = runner(problem, x)
    fixed = run(fixed_config(problem.D))
    results = []
    for cfg in cands:
        record = dict(cfg=dict(cfg), ok=False, rel_err=float("nan"), rel_err_fixed=float("nan"), ms=float("inf"))
        try:
            out = run(cfg)
            if torch.isfinite(out).all():
                record["rel_err"] = rel_err(out[rows], ref)
                record["rel_err_fixed"] = rel_err(out, fixed)
                record["ok"] = record["rel_err"] < REL_TOL and record["rel_err_fixed"] < REL_TOL
            del out
            if record["ok"]:
                record["ms"] = time_ms(lambda: run(cfg), warmup_ms=10, rep_ms=rep_ms, cuda_graph=True)
        except Exception as exc:            # compile failure, out of resources: not a candidate here
            record["error"] = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        results.append(record)
    del x, ref, fixed
    torch.cuda.empty_cache()
    return results


def ranked(results):
    """The passing configs, fastest first."""
    return [r["cfg"] for r in sorted((r for r in results if r["ok"]), key=lambda r: r["ms"])]


def ship(ranked_of, workers, log=print):
    """{key: config}: per key the fastest config whose ragged check passes (checked in parallel, the winners
    first, then the next fastest of any key whose winner failed). Keys with no passing config are left out."""
    chosen, failed = {}, {}
    depth = 0
    pending = {key: order for key, order in ranked_of.items() if order}
    while pending:
        jobs = {(key, depth): ("ragged", pending[key][depth], key.split("/")[3],
                               torch.float16 if "/fp16/" in key else torch.bfloat16, int(key.split("/")[1][1:]))
                for key in pending}
        for (key, _), error in zip(jobs, in_pool(list(jobs.values()), workers)):
            cfg = pending[key][depth]
            if error is None:
                chosen[key] = cfg
            else:
                failed.setdefault(key, []).append(dict(cfg=cfg, error=error))
                log(f"  {key}: {cfg} failed the ragged check ({error}); trying the next fastest")
        depth += 1
        pending = {key: order for key, order in pending.items() if key not in chosen and depth < len(order)}
    return chosen, failed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m fa2.tune --kernel varlen", description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=["varlen"], default="varlen")
    from fa2.tune import add_cli_options, cli_target, new_document, without_kernel_flag
    add_cli_options(parser, CASE_SETS, "<GPU name>.varlen.json",
                    jobs=(min(16, os.cpu_count() or 1), "compile candidates and run the ragged checks in this many "
                                                        "processes (default: min(16, CPUs); 0 or 1: in this process)"),
                    rep_ms=(25.0, "ms of calls per CUDA graph (default 25)"), budget_s=True)
    args = parser.parse_args(argv)
    target = cli_target(parser, args, CASE_SETS, table_file_name)
    if target is None:
        return 2
    sets, name, _, max_smem, out, previous = target
    document = new_document(previous, name, "varlen", ["--kernel", "varlen", *without_kernel_flag(argv)])
    problems = [p for s in sets for p in CASES[s]]
    candidates_of = {D: candidates(D, max_smem) for D in {p.D for p in problems}}
    t0 = time.time()
    if args.jobs > 1:
        jobs = compile_jobs(problems, candidates_of)
        failed = sum(e is not None for e in in_pool(jobs, args.jobs))
        print(f"[{time.time() - t0:5.0f}s] compiled {len(jobs)} binaries in {args.jobs} processes "
              f"({failed} raised; the timing below records them)", flush=True)
    ranked_of = {}
    for problem in problems:
        if args.budget_s is not None and time.time() - t0 > args.budget_s:
            print(f"[{time.time() - t0:5.0f}s] budget of {args.budget_s:.0f} s spent: {problem.name()} and the "
                  "cases after it are not tuned", flush=True)
            break
        key = problem_key(problem)
        results = measure(problem, candidates_of[problem.D], args.rep_ms)
        document["candidates"][key] = results
        ranked_of[key] = ranked(results)
        best = min(results, key=lambda r: r["ms"])
        fixed_ms = next((r["ms"] for r in results if r["cfg"] == fixed_config(problem.D)), float("nan"))
        print(f"[{time.time() - t0:5.0f}s] {key:40s} {problem.name()}\n        fastest {best['cfg']} "
              f"{best['ms']:.4f} ms (fixed config {fixed_ms:.4f} ms; {sum(r['ok'] for r in results)}/"
              f"{len(results)} passed)", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1, sort_keys=True))   # candidates only: nothing ships yet
    chosen, failed = ship(ranked_of, args.jobs)
    document["configs"].update(chosen)
    if failed:
        document["ragged_check_failed"] = {**previous.get("ragged_check_failed", {}), **failed}
    out.write_text(json.dumps(document, indent=1, sort_keys=True))
    for key, cfg in chosen.items():
        print(f"ships {key:40s} {cfg}")
    print(f"[{time.time() - t0:5.0f}s] wrote {out} ({len(chosen)} keys tuned this run)")
    return 0 if len(chosen) == len(ranked_of) else 1


if __name__ == "__main__":
    sys.exit(main())
