"""fa2.decode's launch options beside cuDNN where the decode family's goals are missed or tied (an H200).

    python gpu/decode_explore.py OUT [SECONDS]     # OUT/decode_explore.csv, a row per (shape, variant)

Shapes: the contiguous ones where SDPA's cuDNN backend was within 1.2 % of fa2.decode (or ahead) in
book/results/decode.csv, and the 1k-key paged ones that missed "paged within 10 % of contiguous", each with its
contiguous twin. Per shape: cuDNN (contiguous only), fa2.decode as shipped, then a grid of (block_n, num_warps,
num_stages, splits, pdl) through DecodePlan, and the same grid's best few with the K and V loads hinted
evict_first (a mutant of chapter 9's module; they are read once). Every variant's output is compared with the
shipped launch's (rel_err <= 1e-2, else the row says "fail"). Rows are written as measured; the run stops
starting new shapes after SECONDS.
"""

import csv
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

import fa2.decoding as decoding
from fa2 import bench_decode as bd
from fa2.bench import interleaved_rounds
from fa2 import runtime
from fa2.chapters import flash_decoding
from fa2.testing import mutant, rel_err

CONTIGUOUS = [(32, 1024), (32, 8192), (32, 131072), (8, 4096), (8, 131072), (1, 131072)]
PAGED_1K = [(1, 1024, 16), (1, 1024, 256), (8, 1024, 16), (8, 1024, 256), (1, 1024, 0), (8, 1024, 0)]
SMOKE = [bd.DecodeShape(1, 48, 0, Hq=4, Hkv=2, D=32), bd.DecodeShape(2, 40, 16, Hq=4, Hkv=1, D=32)]  # CPU check
COLUMNS = ["B", "N", "layout", "variant", "block_n", "num_warps", "num_stages", "num_splits", "pdl", "evict",
           "gpu_us", "vs_shipped", "vs_cudnn", "rel_err", "check", "device", "torch", "triton", "command"]


def environment():
    """The columns every row carries: the GPU, the versions and the command line that made the file."""
    import triton
    return dict(device=bd.device_name(), torch=torch.__version__, triton=triton.__version__,
                command="python " + " ".join(sys.argv))

EVICT = mutant(flash_decoding, {
    "k = tl.load(k_head + k_rows[:, None], mask=load_mask, other=0.0)":
        "k = tl.load(k_head + k_rows[:, None], mask=load_mask, other=0.0, eviction_policy='evict_first')",
    "v = tl.load(v_head + v_rows[:, None], mask=load_mask, other=0.0)":
        "v = tl.load(v_head + v_rows[:, None], mask=load_mask, other=0.0, eviction_policy='evict_first')"})


def shape_inputs(shapes, seconds):
    """(shape, its input sets) for each shape in turn, until `seconds` have passed since the first."""
    start = time.perf_counter()
    for shape in shapes:
        if time.perf_counter() - start > seconds:
            print(f"time's up before {shape.name()}", flush=True)
            return
        yield shape, bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))


def rounds_us(calls, rounds):
    """GPU µs of each (fn, sets) in `calls`, timed in `rounds` interleaved rounds (fa2.bench.interleaved_rounds:
    every call once per round, the order rotated): each one's list of times. A call that fails raises."""
    results, errors = interleaved_rounds([lambda fn=fn, sets=sets: bd.gpu_time_us(fn, sets)[0]
                                          for fn, sets in calls], rounds)
    failed = [error for error in errors if error]
    if failed:
        raise RuntimeError(failed[0])
    return results


def checked_medians(shape, sets, fns, rounds, skip_failed=False):
    """(errors, times, medians) of `fns` ({name: fn(inputs) -> o}) at `shape`: each one's error against the fp64
    reference with ragged lengths and NaN past them, on fresh inputs (fa2.bench_decode.ragged_error); then every fn
    (skip_failed: those within 1e-2) and, on the GPU with a contiguous cache, SDPA's cuDNN backend as "cudnn", timed
    in `rounds` interleaved rounds (one on the CPU): each one's list of µs and its median, by name."""
    gpu = runtime.DEVICE == "cuda"
    fresh = bd.make_inputs(shape, torch.Generator(runtime.DEVICE).manual_seed(1))
    errors = bd.ragged_error(fresh, torch.Generator(runtime.DEVICE).manual_seed(2), fns)
    del fresh
    timed = {name: fn for name, fn in fns.items() if not skip_failed or errors[name] <= 1e-2}
    if gpu and shape.page_size == 0:
        timed["cudnn"] = bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, sets)
    names = list(timed)
    times = dict(zip(names, rounds_us([(timed[n], sets) for n in names], rounds if gpu else 1)))
    return errors, times, {name: statistics.median(t) for name, t in times.items()}


def timed_columns(name, errors, times, med, baseline, err_column="rel_err_ragged"):
    """The result columns of `name`'s row after checked_medians: gpu_us, round_us, vs_<baseline> and vs_cudnn (its
    median over theirs), its ragged error under `err_column` and check; blank where it has none (not timed, no
    cuDNN, not checked)."""
    err, us = errors.get(name), med.get(name)
    ratio = lambda other: f"{us / med[other]:.4f}" if us is not None and other in med else ""
    return {"gpu_us": "" if us is None else f"{us:.4g}", "round_us": " ".join(f"{t:.4g}" for t in times.get(name, [])),
            f"vs_{baseline}": ratio(baseline), "vs_cudnn": ratio("cudnn"),
            err_column: "" if err is None else f"{err:.1e}",
            "check": "" if err is None else ("ok" if err <= 1e-2 else "fail")}


def summary(name, errors, med):
    """' | name µs' (FAIL when its ragged check failed) for a probe's progress line."""
    err = errors.get(name)
    return f" | {name} {med[name]:.2f}" + ("" if err is None or err <= 1e-2 else " FAIL")


def plan_fn(module, x, cfg, splits):
    """fa2.decode's DecodePlan for x with launch config cfg and `splits`, launching `module`'s kernels (chapter 9's
    module or a mutant of it): a function of an input set, returning o."""
    shipped = decoding.decode_launch
    decoding.decode_launch = module.decode_launch
    try:
        plan = decoding.DecodePlan(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table,
                                   x.q.shape[-1] ** -0.5, splits, -1, 0.0, config=cfg)
    finally:
        decoding.decode_launch = shipped
    return lambda x: plan(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table)[0]


def split_choices(shipped):
    base = {1: (1, 2, 3, 4), 4: (2, 4, 6, 8, 12, 16)}.get(shipped)
    return base or tuple(sorted({max(1, shipped // 4), max(1, shipped // 2), shipped, min(128, shipped * 2)}))


def grid(paged, shipped):
    if paged:
        configs = [(bn, w, s) for bn in (32, 64) for w in (4,) for s in (3, 4, 5, 6)]
        return [(c, sp, pdl) for c in configs for sp in split_choices(shipped) for pdl in (False, True)]
    configs = [(bn, w, s) for bn in (32, 64, 128) for w in (4, 8) for s in (2, 3, 4)]
    return [(c, shipped, "auto") for c in configs] + [((64, 4, 3), sp, "auto") for sp in split_choices(shipped)]


def main(out, seconds=280.0):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()            # for the progress lines
    shapes = [bd.DecodeShape(B, N) for B, N in CONTIGUOUS] + [bd.DecodeShape(B, N, p) for B, N, p in PAGED_1K]
    if runtime.DEVICE != "cuda":
        shapes = SMOKE
    with open(out / "decode_explore.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        context = environment()
        writer.writeheader()
        for shape, sets in shape_inputs(shapes, seconds):
            x = sets[0]
            paged = shape.page_size > 0
            shipped_fn = bd.build_fa2(shape, sets)
            expected = shipped_fn(x).float()
            shipped_us = bd.gpu_time_us(shipped_fn, sets)[0]
            cudnn_us = None
            if not paged and runtime.DEVICE == "cuda":
                cudnn_us = bd.gpu_time_us(bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, sets), sets)[0]
            shipped_splits = decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
            base = dict(B=shape.B, N=shape.N, layout=shape.layout, **context)

            def row(variant, us, **extra):
                r = dict(base, variant=variant, gpu_us=f"{us:.4g}", vs_shipped=f"{us / shipped_us:.4f}",
                         vs_cudnn=f"{us / cudnn_us:.4f}" if cudnn_us else "", **extra)
                writer.writerow(r)
                f.flush()
                return r

            row("shipped", shipped_us, num_splits=shipped_splits)
            if cudnn_us:
                row("cudnn", cudnn_us)
            timed = []
            for (bn, w, s), splits, pdl in grid(paged, shipped_splits):
                cfg = dict(block_n=bn, num_warps=w, num_stages=s, pdl=pdl)
                try:
                    fn = plan_fn(flash_decoding, x, cfg, splits)
                    err = rel_err(fn(x).float(), expected)
                    us = bd.gpu_time_us(fn, sets)[0]
                except Exception as error:              # out of shared memory and the like: note it, go on
                    print(f"  {shape.name()} {cfg} {splits}: {type(error).__name__}", flush=True)
                    continue
                timed.append((us, cfg, splits))
                row("grid", us, block_n=bn, num_warps=w, num_stages=s, num_splits=splits, pdl=pdl,
                    rel_err=f"{err:.1e}", check="ok" if err <= 1e-2 else "fail")
            # the best few again, with evict_first on the K and V loads
            for us0, cfg, splits in sorted(timed, key=lambda t: t[0])[:4]:
                fn = plan_fn(EVICT, x, cfg, splits)
                err = rel_err(fn(x).float(), expected)
                us = bd.gpu_time_us(fn, sets)[0]
                again = bd.gpu_time_us(fn, sets)[0]
                row("evict", us, **cfg, num_splits=splits, evict="first",
                    rel_err=f"{err:.1e}", check="ok" if err <= 1e-2 else "fail")
                row("evict_again", again, **cfg, num_splits=splits, evict="first")
            best = min(timed, key=lambda t: t[0]) if timed else None
            print(f"{shape.name():24s} shipped {shipped_us:8.2f} us"
                  + (f"  cudnn {cudnn_us:8.2f}" if cudnn_us else "")
                  + (f"  best grid {best[0]:8.2f} {best[1]} splits {best[2]}" if best else "")
                  + f"  [{time.perf_counter() - start:5.0f} s]", flush=True)
            del sets, x, expected
            if runtime.DEVICE == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *map(float, sys.argv[2:3]))
