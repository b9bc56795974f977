"""A paged cache's page look-up per key tile instead of per key, and the pipeline depth of one-tile splits (an H200).

Chapter 9 now ships the per-page look-up ("page_tile" below); when book/results/decode_page_tile.csv was made it
shipped the per-key gather, and that is what the rows named "shipped" (and "stages3", "stages2") still time: a
mutant that puts the gather back.

    python gpu/decode_page_tile.py OUT [ROUNDS]     # OUT/decode_page_tile.csv, a row per (shape, variant)

Before, chapter 9's `_cache_rows` read one block-table entry per key of a tile (a gather of BLOCK_N entries). Tiles
start on the BLOCK_N grid, so where PAGE_SIZE >= BLOCK_N a tile lies in one page: one scalar read gives its page
("page_one" does only that and keeps the gather for smaller pages). Where PAGE_SIZE < BLOCK_N the tile spans
BLOCK_N / PAGE_SIZE pages: read those entries once and broadcast each over its PAGE_SIZE keys ("page_tile" does
both: chapter 9's kernel now). Beside them: the per-key gather at fewer pipeline stages (a B = 1, 1k-key split has
one tile, so the pipeline only adds a prologue). Per shape every variant is checked against the "shipped" row's
output (rel_err <= 1e-2) and against the fp64 reference with ragged lengths and NaN past them
(fa2.bench_decode.ragged_error; the larger error is the row's rel_err), then timed in ROUNDS interleaved rounds
(order rotated each round; CUDA-graph replays, fa2.bench_decode.gpu_time_us), the median kept. Contiguous twins of
each shape are timed in the same rounds, so "vs_contiguous" compares like with like.
"""

import csv
import inspect
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decode_explore as ex                         # noqa: E402  (plan_fn, environment, shape_inputs)
from fa2 import bench_decode as bd                  # noqa: E402
from fa2 import runtime                             # noqa: E402
from fa2.chapters import flash_decoding             # noqa: E402
from fa2.testing import mutant, rel_err             # noqa: E402


def _per_page_lookup():
    """Chapter 9's per-page look-up in `_cache_rows`: the text from its `if PAGE_SIZE >= BLOCK_N:` to the line
    that computes `row`."""
    source = inspect.getsource(flash_decoding)
    first = source.index("        if PAGE_SIZE >= BLOCK_N:")
    return source[first:source.index("        row = (kv_idx % PAGE_SIZE)", first)]


PER_PAGE = _per_page_lookup()
GATHER = ("        page = tl.load(BLOCK_TABLE + table_row + (kv_idx // PAGE_SIZE) * stride_table_p,\n"
          "                       mask=kv_idx < seqlen, other=0).to(tl.int64)              # (BLOCK_N,)\n")
ONE_PAGE_ONLY = PER_PAGE[:PER_PAGE.index("        else:")] + "        else:\n" + GATHER.replace("        ", "            ")
PER_KEY = mutant(flash_decoding, {PER_PAGE: GATHER})          # one table read per key (chapter 9 before)
PAGE_ONE = mutant(flash_decoding, {PER_PAGE: ONE_PAGE_ONLY})  # per tile where a page holds it, else per key
SHAPES = [(1, 1024), (1, 4096), (1, 8192), (1, 131072), (8, 1024), (8, 32768), (32, 8192)]
SMOKE = [(1, 48), (2, 40)]
LAYOUTS = (16, 256)
COLUMNS = ["B", "N", "layout", "variant", "block_n", "num_warps", "num_stages", "num_splits", "gpu_us", "round_us",
           "vs_shipped", "vs_contiguous", "rel_err", "check", "device", "torch", "triton", "command"]


def variants(paged):
    """(name, module, config) to time for one cache layout; None config: the shipped launch options."""
    if not paged:
        return [("shipped", flash_decoding, None), ("stages2", flash_decoding, dict(num_stages=2))]
    return [("shipped", PER_KEY, None),
            ("stages3", PER_KEY, dict(num_stages=3)),
            ("stages2", PER_KEY, dict(num_stages=2)),
            ("page_one", PAGE_ONE, None),
            ("page_tile", flash_decoding, None),
            ("page_tile_stages3", flash_decoding, dict(num_stages=3))]


def main(out, rounds=3):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gpu = runtime.DEVICE == "cuda"
    shape_kw = {} if gpu else dict(Hq=4, Hkv=2, D=32)
    with open(out / "decode_page_tile.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        context = ex.environment()
        for B, N in (SHAPES if gpu else SMOKE):
            entries = []             # (layout, variant, fn, sets, cfg, splits, err)
            ragged = {}              # layout -> {variant: rel_err against fp64, ragged lengths, poison}
            for page in (0,) + LAYOUTS:
                shape = bd.DecodeShape(B, N, page, **shape_kw)
                sets = bd.input_sets(shape, torch.Generator(runtime.DEVICE).manual_seed(0))
                x = sets[0]
                shipped = ex.plan_fn(flash_decoding, x, None, None)
                expected = shipped(x).float()
                splits = ex.decoding.choose_num_splits(x.q, x.k_cache, x.block_table)
                for name, module, cfg in variants(page > 0):
                    try:
                        fn = ex.plan_fn(module, x, cfg, None)
                        err = rel_err(fn(x).float(), expected)
                    except Exception as error:
                        print(f"  {shape.name()} {name}: {type(error).__name__}: {str(error)[:300]}", flush=True)
                        continue
                    entries.append((shape.layout, name, fn, sets, cfg, splits, err))
                # fp64, ragged lengths in [1, N], NaN past them: on a fresh input set (poison spoils it)
                fresh = bd.make_inputs(shape, torch.Generator(runtime.DEVICE).manual_seed(1))
                fns = {e[1]: e[2] for e in entries if e[0] == shape.layout}
                ragged[shape.layout] = bd.ragged_error(fresh, torch.Generator(runtime.DEVICE).manual_seed(2), fns)
            timed = ex.rounds_us([(e[2], e[3]) for e in entries], rounds if gpu else 1)
            times = {(e[0], e[1]): t for e, t in zip(entries, timed)}
            median = {k: statistics.median(v) for k, v in times.items()}
            line = f"B={B} N={N}:"
            for layout, name, fn, sets, cfg, splits, err in entries:
                us = median[(layout, name)]
                err = max(err, ragged[layout][name])
                writer.writerow(dict(
                    B=B, N=N, layout=layout, variant=name, num_splits=splits, gpu_us=f"{us:.4g}",
                    round_us=" ".join(f"{t:.4g}" for t in times[(layout, name)]),
                    vs_shipped=f"{us / median[(layout, 'shipped')]:.4f}",
                    vs_contiguous=f"{us / median[('contiguous', 'shipped')]:.4f}",
                    **{k: v for k, v in (cfg or {}).items() if k in COLUMNS},
                    rel_err=f"{err:.1e}", check="ok" if err <= 1e-2 else "fail", **context))
                line += f" | {layout} {name} {us:.2f}{'' if err <= 1e-2 else ' FAIL'}"
            f.flush()
            print(line, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
