"""Tune and ship configs (needs a CUDA GPU): `python -m fa2.tune` writes fa2/configs/<GPU name>.json there.

For every tuning key of the chosen cases (head dim pieces, dtype, mask, length buckets, waves) it checks each
pruned candidate against the chapter-5 kernel on the same inputs, times the ones that pass from a CUDA graph
(GPU time only), and keeps the fastest. The JSON records every candidate's time and error beside the choice,
and the commands that made it.

    python -m fa2.tune                              # every case: a new table
    python -m fa2.tune --cases headdim,tail --jobs 8   # only those keys, merged into the existing table
    python -m fa2.tune --kernel varlen               # chapter 10's kernel: fa2/configs/<GPU name>.varlen.json

Case sets: ``reference`` (the reference sweep's head dims 64 and 128 at four lengths, plus 16, 32 and 256),
``headdim`` (the head dims that run as two column pieces, at the head-dim sweep's shapes) and ``tail`` (grids
of under four waves, where the best tile differs). ``--kernel varlen`` tunes chapter 10's kernel instead, with its
own cases, table and options (`fa2/tune_varlen.py`). With ``--cases`` the file named by ``--out`` keeps its
other keys and is rewritten after every key, so an interrupted run keeps what it finished.
"""

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

import torch

from fa2 import runtime
from fa2.chapters.autotune import (FAST_CANDIDATES, GENERIC_CANDIDATES, SHIPPED_DIR, device_file_name, prune,
                                   tune, tuning_key)
from fa2.chapters.fast import attention_fast
from fa2.chapters.forward import attention_forward
from fa2.testing import time_ms

# (B, H, N) per length; D = 128 uses H = 32, D = 64 uses H = 16 (the reference sweep's shapes)
TUNING_SHAPES = {512: 32, 2048: 8, 8192: 1, 16384: 1}
EXTRA_HEAD_DIMS = (16, 32, 256)   # tuned at N = 2048 only, so first calls never autotune on this GPU
SPLIT_HEAD_DIMS = (80, 96, 160, 192)   # two column pieces each: 64+16, 64+32, 128+32, 128+64
# grids under 4 waves on a 132-SM H200 (waves bucket w0 or w1), from the reference sweep: (B, H, N, D)
TAIL_SHAPES = [(1, 16, 512, 64), (8, 16, 512, 64), (1, 16, 2048, 64), (1, 32, 512, 128), (1, 32, 2048, 128)]
CASE_SETS = ("reference", "headdim", "tail")


def tuning_cases(sets=CASE_SETS):
    """(B, H, N, D) of every key of the named case sets, in order, without repeats."""
    cases = []
    if "reference" in sets:
        cases += [(b, 32 if d == 128 else 16, n, d) for d in (64, 128) for n, b in TUNING_SHAPES.items()]
        cases += [(8, 16, 2048, d) for d in EXTRA_HEAD_DIMS]
    if "headdim" in sets:   # the head-dim sweep's shapes (fa2.bench --sweep headdim)
        cases += [shape for d in SPLIT_HEAD_DIMS for shape in ((2, 32, 2048, d), (1, 16, 8192, d))]
    if "tail" in sets:
        cases += TAIL_SHAPES
    return list(dict.fromkeys(cases))


def _runner(kernel, q, k, v, causal):
    if kernel == "fast":
        return lambda cfg: attention_fast(q, k, v, causal, config=cfg, host_desc=True)[0]
    return lambda cfg: attention_forward(q, k, v, causal, **cfg)[0]


def _compile_one(job):
    """Worker of `precompile`: run one config once on inputs of the case's shape, so that Triton's on-disk cache
    holds its binary when the timing process asks for it. Returns an error name or None."""
    kernel, (B, H, N, D), dtype, causal, cfg = job
    try:
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
        if cfg is None:
            attention_forward(q, k, v, causal)
        else:
            _runner(kernel, q, k, v, causal)(cfg)
        torch.cuda.synchronize()
    except Exception as exc:              # the timing process meets it again and records it
        return type(exc).__name__
    return None


def precompile(jobs, workers):
    """Compile every (case, candidate) in `workers` processes: compiling is CPU work, timing needs the GPU alone."""
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return sum(error is not None for error in pool.imap_unordered(_compile_one, jobs))


def compile_jobs(kernel, cases, candidates_of):
    """One `_compile_one` job per binary the tuning will run: a binary depends on the head dim, dtype, mask and
    config (the tuning shapes are multiples of 128 long and specialise alike), and None stands for the reference
    (chapter 5's default config)."""
    jobs, seen = [], set()
    for shape, dtype, causal in cases:
        for cfg in [None] + candidates_of[shape[3]]:
            binary = (shape[3], dtype, causal, None if cfg is None else tuple(sorted(cfg.items())))
            if binary not in seen:
                seen.add(binary)
                jobs.append((kernel, shape, dtype, causal, cfg))
    return jobs


def new_document(previous, device_name, kernel, argv):
    """The JSON to write: `previous` table's configs, candidates and note kept (empty for a new table), this run's
    versions, and the commands that made it."""
    document = {key: previous[key] for key in ("note",) if key in previous}
    document.update(configs=dict(previous.get("configs", {})), candidates=dict(previous.get("candidates", {})),
                    device=device_name, kernel=kernel, torch=torch.__version__,
                    triton=__import__("triton").__version__,
                    command="; ".join(filter(None, [previous.get("command"),
                                                    " ".join(["python -m fa2.tune", *argv])])))
    return document


def add_cli_options(parser, known_sets, table, jobs, rep_ms, budget_s=False):
    """The options both tuners' command lines share (this one's and `fa2/tune_varlen.py`'s), in their order:
    --cases, --jobs, --rep-ms, [--budget-s,] --out. `jobs` and `rep_ms` are each tuner's (default, help);
    `table` the default output's name in fa2/configs/."""
    parser.add_argument("--cases", default=None,
                        help=f"comma-separated case sets of {', '.join(known_sets)} (default: all, a new table); "
                             "with this option the existing table keeps its other keys")
    parser.add_argument("--jobs", type=int, default=jobs[0], help=jobs[1])
    parser.add_argument("--rep-ms", type=float, default=rep_ms[0], help=rep_ms[1])
    if budget_s:
        parser.add_argument("--budget-s", type=float, default=None, help="start no new case after this many seconds")
    parser.add_argument("--out", default=None, help=f"output JSON (default fa2/configs/{table})")


def cli_target(parser, args, known_sets, file_name):
    """What both tuners' command lines settle before tuning (this one's and `fa2/tune_varlen.py`'s): the case sets
    `--cases` names (all of `known_sets` without it; an unknown name is a usage error), then on the GPU its name,
    properties and opt-in shared memory per block, the output path (`--out`, else fa2/configs/file_name(GPU
    name)) and, with `--cases`, the table already there (its other keys stay). None without a CUDA GPU, after
    saying why."""
    sets = known_sets if args.cases is None else tuple(args.cases.split(","))
    unknown = set(sets) - set(known_sets)
    if unknown:
        parser.error(f"unknown case set(s) {', '.join(sorted(unknown))}; choose from {', '.join(known_sets)}")
    if runtime.DEVICE != "cuda":
        print("fa2.tune needs a CUDA GPU: it times candidate configs on the GPU whose table it writes; "
              "this machine runs kernels under the Triton interpreter", file=sys.stderr)
        return None
    name = torch.cuda.get_device_name()
    props = torch.cuda.get_device_properties(0)
    max_smem = getattr(props, "shared_memory_per_block_optin", 99 * 1024)
    out = Path(args.out) if args.out else SHIPPED_DIR / file_name(name)
    previous = json.loads(out.read_text()) if args.cases is not None and out.exists() else {}
    return sets, name, props, max_smem, out, previous


def without_kernel_flag(argv):
    """argv without `--kernel varlen` / `--kernel=varlen`: tune_varlen writes the flag into its table once."""
    kept, skip = [], False
    for a, b in zip(argv, [*argv[1:], None]):
        if skip:
            skip = False
        elif a == "--kernel" and b == "varlen":
            skip = True
        elif a != "--kernel=varlen":
            kept.append(a)
    return kept


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rest = without_kernel_flag(argv)
    if rest != argv:
        from fa2 import tune_varlen                   # chapter 10's kernel: its own cases and options
        return tune_varlen.main(rest)
    parser = argparse.ArgumentParser(prog="python -m fa2.tune", description=__doc__.splitlines()[0],
                                     epilog="Needs a CUDA GPU: tuning times kernels on the GPU it will ship for.")
    parser.add_argument("--kernel", choices=["fast", "generic", "varlen"], default=None,
                        help="default: fast on sm_90+, generic elsewhere; varlen: chapter 10's kernel "
                             "(python -m fa2.tune --kernel varlen --help)")
    add_cli_options(parser, CASE_SETS, "<GPU name>.json",
                    jobs=(0, "compile the candidates in this many processes first (default 0: compile as they "
                             "are timed)"),
                    rep_ms=(40.0, "each candidate's CUDA graph holds about this many ms of calls, replayed 10 times "
                                  "(default 40)"))
    args = parser.parse_args(argv)
    target = cli_target(parser, args, CASE_SETS, device_file_name)
    if target is None:
        return 2
    sets, name, props, max_smem, out, previous = target
    kernel = args.kernel or ("fast" if torch.cuda.get_device_capability()[0] >= 9 else "generic")
    document = new_document(previous, name, kernel, argv)
    candidates_of = {D: prune(kernel, FAST_CANDIDATES if kernel == "fast" else GENERIC_CANDIDATES, D, max_smem)
                     for D in {D for *_, D in tuning_cases(sets)}}
    t0 = time.time()
    cases = [(shape, dtype, causal) for shape in tuning_cases(sets)
             for dtype in (torch.float16, torch.bfloat16) for causal in (False, True)]
    if args.jobs > 0:
        jobs = compile_jobs(kernel, cases, candidates_of)
        failed = precompile(jobs, args.jobs)
        print(f"[{time.time() - t0:5.0f}s] compiled {len(jobs)} binaries in {args.jobs} processes "
              f"({failed} raised; the timing below records them)", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    for (B, H, N, D), dtype, causal in cases:
        q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
        reference = attention_forward(q, k, v, causal)[0]
        key = tuning_key(kernel, q, k, causal, props.multi_processor_count)
        best, results = tune(_runner(kernel, q, k, v, causal), candidates_of[D], reference,
                             bench=lambda fn: time_ms(fn, warmup_ms=10, rep_ms=args.rep_ms, cuda_graph=True))
        document["configs"][key] = best
        document["candidates"][key] = results
        fastest = min(r["ms"] for r in results)
        print(f"[{time.time() - t0:5.0f}s] {key:44s} -> {best}  {fastest:.3f} ms  "
              f"({sum(r['ok'] for r in results)}/{len(results)} passed)", flush=True)
        out.write_text(json.dumps(document, indent=1, sort_keys=True))   # after every key: a cut run keeps it
        del q, k, v, reference
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
