"""The README's numbers, and those of the page of repeated runs it links (book/results/runs.md), are the CSVs'
numbers: every figure is recomputed here from the file it cites, formatted the same way (ratios truncated, never
rounded up), and must appear verbatim. A re-measured CSV without an updated README or runs page fails here.

`python tests/test_readme_numbers.py` prints the rows of runs.md's tables, computed from the CSVs."""
import csv
import json
import math
import re
import statistics
from pathlib import Path

import pytest

from fa2.bench import by_shape, read_rows, summarize, truncated
from fa2.bench_decode import DecodeShape

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "results"
README = (ROOT / "README.md").read_text()
RUNS = (RESULTS / "runs.md").read_text()

# The headline sweep's runs, oldest first, with the Gluon table each was timed with.
HEADLINE_RUNS = {
    "headline_before_gluon": "none: chapter 6's kernel everywhere",
    "headline_v0312": "0.3.12",
    "headline_v0312_run2": "0.3.12",
    "headline": "0.3.13",
    "headline_run2": "0.3.13",
    "headline_run3": "0.3.13",
    "headline_v0317": "0.3.17 (shipped)",
    "headline_v0317_run5": "0.3.17 (shipped)",
    "headline_v0319_run6": "0.3.17 (shipped)",
    "headline_v0319_run7": "0.3.17 (shipped)",
    "headline_v0320_run8": "0.3.17 (shipped)",
    "headline_own_down": "0.3.22 candidate, not shipped",
}
REFERENCE_RUNS = {
    "reference_before_gluon": "none: chapter 6's kernel everywhere",
    "reference_v0316": "0.3.16",
    "reference_a_v0317_run1": "0.3.17 before its last D = 64 change, N ≤ 2048",
    "reference": "0.3.17 (shipped); N ≤ 2048 and N ≥ 8192 in two calls",
    "reference_a_v0317_run3": "0.3.17 (shipped), N ≤ 2048",
}


def money_rows(name):
    rows = {row["provider"]: row for row in read_rows(RESULTS / f"{name}.csv")}
    assert {"fa2", "sdpa_flash", "sdpa_cudnn"} <= set(rows)
    return rows


def ratio(rows, peer):
    return truncated(float(rows["fa2"]["tflops"]) / float(rows[peer]["tflops"]))


def ranges(name):
    """'min–max× (geometric mean)' of fa2 over FA2 and over cuDNN in one sweep's CSV, and its shape count."""
    rows = read_rows(RESULTS / f"{name}.csv")
    cells = []
    for peer in ("sdpa_flash", "sdpa_cudnn"):
        s = summarize(rows, peer)
        cells.append(f"{truncated(s['min'])}–{truncated(s['max'])}× ({truncated(s['geomean'])})")
    return summarize(rows, "sdpa_cudnn")["n"], cells


def headline_row(name):
    """One row of runs.md's table of headline sweeps."""
    n, (flash, cudnn) = ranges(name)
    at = by_shape(read_rows(RESULTS / f"{name}.csv"))
    short = ratio(at[(32, 32, 32, 512, 128, True, "bf16")], "sdpa_cudnn")
    money = ratio(at[(8, 32, 32, 2048, 128, True, "bf16")], "sdpa_cudnn")
    return (f"| [`{name}.csv`]({name}.csv) | {HEADLINE_RUNS[name]} | {flash} | {cudnn} | {money}× | {short}× |")


def reference_row(name):
    """One row of runs.md's table of reference sweeps (whole or one half)."""
    n, (flash, cudnn) = ranges(name)
    return f"| [`{name}.csv`]({name}.csv) | {REFERENCE_RUNS[name]} | {n} | {flash} | {cudnn} |"


# -- README.md ------------------------------------------------------------------------------------------------


def test_the_money_table_is_money_csv():
    rows = money_rows("money")
    fa2 = rows["fa2"]
    assert f"| **fa2 (this book, Triton)** | {float(fa2['ms']):.3f} | {float(fa2['tflops']):.1f} | |" in README
    for provider, row in rows.items():
        if provider != "fa2":
            cells = rf"\| {row['label'].split(' (')[0]}[^|]* \| {float(row['ms']):.3f} \| {float(row['tflops']):.1f} \| "
            assert re.search(cells + rf"(\*\*)?{ratio(rows, provider)}(\*\*)? \|", README), provider
    assert all(row["rounds"] == "5" for row in rows.values())


def test_the_second_run_is_money_run2_csv():
    first, second = money_rows("money"), money_rows("money_run2")
    line = (f"fa2 {float(second['fa2']['ms']):.3f} ms, FA2 {float(second['sdpa_flash']['ms']):.3f} ms, "
            f"cuDNN {float(second['sdpa_cudnn']['ms']):.3f} ms: {ratio(second, 'sdpa_flash')}× FA2 and "
            f"{ratio(second, 'sdpa_cudnn')}× cuDNN")
    assert line in README
    moved = {p: abs(float(second[p]["ms"]) / float(first[p]["ms"]) - 1) * 100 for p in ("fa2", "sdpa_flash", "sdpa_cudnn")}
    assert (f"fa2's time moved {math.ceil(moved['fa2'] * 10) / 10:.1f} % at most, FA2's "
            f"{moved['sdpa_flash']:.1f} % and cuDNN's {moved['sdpa_cudnn']:.1f} %") in README


@pytest.mark.parametrize("name", ["headline_v0320_run8", "reference", "headdim"])
def test_each_prefill_sweep_row(name):
    n, (flash, cudnn) = ranges(name)
    line = next(line for line in README.splitlines() if line.startswith("| [") and f"(book/results/{name}.csv)" in line)
    assert line.endswith(f"| {n} | {flash} | {cudnn} |"), line


def test_the_reference_sweeps_shapes_below_1_2_are_named():
    rows = read_rows(RESULTS / "reference.csv")
    below = summarize(rows, "sdpa_flash")["below"]
    assert below, "the README names the shapes below 1.2× FA2; with none, say so instead"
    for shape, r in below:
        key = (shape.B, shape.H, shape.Hkv, shape.N, shape.D, shape.causal, shape.dtype)
        flash_us = float(by_shape(rows)[key]["sdpa_flash"]["ms"]) * 1000
        mask = "causal" if shape.causal else "non-causal"
        assert (f"({shape.B}, {shape.H}, {shape.N}, {shape.D}) {mask} {shape.dtype} at {truncated(r)}× "
                f"(FA2: {flash_us:.0f} µs)") in README
    assert f"every other reference shape is at least 1.2×" in README or len(below) > 1


def test_where_cudnn_is_faster_is_reference_and_headdim_csv():
    """'Where fa2 loses': how many reference shapes cuDNN wins, split by head dim, and their ratios."""
    shapes = by_shape(read_rows(RESULTS / "reference.csv"))
    r = {key: float(p["fa2"]["tflops"]) / float(p["sdpa_cudnn"]["tflops"]) for key, p in shapes.items()}
    slower = {key for key, v in r.items() if v < 1}
    d64 = sorted(r[k] for k in slower if k[4] == 64)
    d128 = sorted(r[k] for k in slower if k[4] == 128)
    assert len(slower) == len(d64) + len(d128)
    text = README.replace("\n", " ").replace("  ", " ")
    assert f"cuDNN is faster than fa2 at {len(slower)} of the reference sweep's {len(shapes)} shapes" in text
    assert f"{len(d64)} of the {sum(k[4] == 64 for k in shapes)} with D = 64 (down to {truncated(d64[1])}×" in text
    lowest = min(slower, key=r.get)
    assert (f"({lowest[0]}, {lowest[1]}, {lowest[3]}, {lowest[4]}) {'causal' if lowest[5] else 'non-causal'} "
            f"{lowest[6]} at {truncated(d64[0])}×") in text
    n512 = {k[3] for k in slower if k[4] == 128}
    assert n512 == {512}
    assert f"{len(d128)} with D = 128, all at N = 512 ({truncated(d128[0])}–{truncated(d128[-1])}×)" in text
    big = [float(p["fa2"]["tflops"]) / float(p["sdpa_cudnn"]["tflops"])
           for key, p in by_shape(read_rows(RESULTS / "headdim.csv")).items() if key[4] in (160, 192, 256)]
    assert f"Head dims 160, 192 and 256 run chapter 6's kernel, not the Gluon one: {truncated(min(big))}–" \
           f"{truncated(max(big))}× cuDNN" in text


def decode_rows():
    rows = [r for r in csv.DictReader(open(RESULTS / "decode.csv")) if r["check"] in ("ok", "n/a")]
    return {(r["layout"], int(r["B"]), int(r["N"]), r["provider"]): r for r in rows}


def test_the_decode_line_is_decode_csv():
    us = {k: float(r["gpu_us"]) for k, r in decode_rows().items()}
    fa2 = {k[:3]: v for k, v in us.items() if k[3] == "fa2"}
    contiguous = [k for k in fa2 if k[0] == "contiguous"]
    flash = [us[(*k, "sdpa_flash")] / fa2[k] for k in contiguous]
    cudnn = [us[(*k, "sdpa_cudnn")] / fa2[k] for k in contiguous]
    paged = [fa2[k] / fa2[("contiguous", *k[1:])] for k in fa2 if k[0] != "contiguous"]
    pct = decode_rows()[("contiguous", 1, 131072, "fa2")]["pct_of_copy"]
    line = (f"B = 1 with 128k keys at {pct} % of a device copy of the same bytes, B = 1 with 8k keys in "
            f"{fa2[('contiguous', 1, 8192)]:.2f} µs; FA2's time / fa2's {truncated(min(flash))}–"
            f"{truncated(max(flash))}, cuDNN's {truncated(min(cudnn))}–{truncated(max(cudnn))}; paged caches "
            f"{truncated(min(paged))}–{truncated(max(paged))}× the contiguous time")
    assert line in README


def test_where_cudnn_decodes_faster_is_decode_csv():
    rows = decode_rows()
    behind = [(k, float(rows[(*k[:3], "sdpa_cudnn")]["gpu_us"]) / float(r["gpu_us"]))
              for k, r in rows.items() if k[3] == "fa2" and k[0] == "contiguous"
              and float(rows[(*k[:3], "sdpa_cudnn")]["gpu_us"]) < float(r["gpu_us"])]
    assert {k[1] for k, _ in behind} <= {8, 32} and min(k[2] for k, _ in behind) >= 4096
    rates = [float(rows[k]["gbs"]) for k, _ in behind] + [float(rows[(*k[:3], "sdpa_cudnn")]["gbs"]) for k, _ in behind]
    text = README.replace("\n", " ").replace("  ", " ")
    assert (f"read the cache at {math.floor(min(rates) / 10) / 100:.2f} to {math.floor(max(rates) / 10) / 100:.2f} TB/s"
            in text)
    assert (f"cuDNN's time is {truncated(min(v for _, v in behind))}–{truncated(max(v for _, v in behind))} of "
            f"fa2's at {len(behind)} of those shapes") in text


def window_ratios(name):
    """A window sweep's fa2 over FlexAttention on the window, and fa2's rate there over its plain causal rate."""
    rows = list(csv.DictReader(open(RESULTS / f"{name}.csv")))
    windowed = {r["provider"]: float(r["tflops"]) for r in rows if r["window"]}
    plain = {r["provider"]: float(r["tflops"]) for r in rows if not r["window"]}
    return truncated(windowed["fa2"] / windowed["flex"]), truncated(windowed["fa2"] / plain["fa2"])


def test_the_varlen_and_window_line_is_their_csvs():
    varlen = {r["provider"]: float(r["tflops"]) for r in csv.DictReader(open(RESULTS / "varlen.csv"))}
    flex, rate = window_ratios("window")
    line = (f"{truncated(varlen['fa2'] / varlen['flex'])}× FlexAttention and "
            f"{truncated(varlen['fa2'] / varlen['sdpa_padded'])}× FA2 on the zero-padded batch; a 4096-token "
            f"window over 32k tokens {flex}× FlexAttention, at {rate} of plain causal fa2's rate on visible scores")
    assert line in README


def gluon_table():
    import json
    return json.loads((ROOT / "fa2" / "configs" / "NVIDIA_H200.gluon.json").read_text())


def test_the_gluon_line_is_the_shipped_table():
    table = gluon_table()
    swept = [f for f in table["families"] if not f.get("interleaved_only")]     # the reference run's shapes
    between = [f for f in table["families"] if f.get("interleaved_only") and f["rung"] is not None]
    gluon = [f for f in swept if f["rung"] is not None]
    speedups = [f["speedup"] for f in gluon]
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
    assert (f"`fa2.attention` runs it at {len(gluon)} of the {len(swept)} shapes measured, where it was "
            f"{truncated(min(speedups))}–{truncated(max(speedups))}× chapter 6's kernel (geometric mean "
            f"{truncated(geomean)}), and at {len(between)} shapes between them that only interleaved runs "
            f"timed") in README


def test_the_order_caveat_is_the_order_study():
    """The README quotes the fixed-order runs of book/results/money_order.md, fa2 first and cuDNN first (the
    first run of each)."""
    fa2_first, cudnn_first = money_rows("order_money_fa2_first_1"), money_rows("order_money_sdpa_cudnn_first_1")
    assert [r["provider"] for r in read_rows(RESULTS / "order_money_fa2_first_1.csv")][0] == "fa2"
    assert [r["provider"] for r in read_rows(RESULTS / "order_money_sdpa_cudnn_first_1.csv")][0] == "sdpa_cudnn"
    assert (f"gave fa2 {ratio(fa2_first, 'sdpa_cudnn')}× cuDNN when fa2 came first and "
            f"{ratio(cudnn_first, 'sdpa_cudnn')}× when cuDNN did") in README.replace("\n", " ")


def test_the_h100_line_is_its_csvs():
    money = money_rows("money_h100")
    assert {row["device"] for row in money.values()} == {"NVIDIA H100 80GB HBM3"}
    n, (flash, cudnn) = ranges("headline_h100")
    assert (f"the headline shape at {ratio(money, 'sdpa_flash')}× FA2 and {ratio(money, 'sdpa_cudnn')}× cuDNN; the "
            f"headline sweep at {flash.replace(' (', ' FA2 (', 1)} and {cudnn.replace(' (', ' cuDNN (', 1)}"
            ) in README.replace("\n", " ")


def test_the_h100_page_is_its_csv_and_the_dispatch():
    """book/results/h100.md: each headline shape's ratios, and the kernel the H200's table gives it on an H100."""
    from fa2.gluon import dispatch
    page = (RESULTS / "h100.md").read_text()
    families = dispatch.shipped_families(dispatch.PREFILL_TABLE_OF["NVIDIA H100 80GB HBM3"])
    for (B, H, _, N, D, causal, dtype), p in by_shape(read_rows(RESULTS / "headline_h100.csv")).items():
        family = dispatch.nearest_family(families, D, dtype, causal, N, B * H)
        gluon = family is not None and family["rung"] is not None
        row = re.search(rf"^\| \({B}, {H}, {N}, {D}\) \| {'causal' if causal else 'full'} \| ([^|]+) \| (.+) \|$", page, re.M)
        assert row, (B, H, N, D, causal)
        assert row.group(1).startswith(f"rung {family['rung']}") if gluon else row.group(1) == "chapter 6's kernel"
        assert row.group(2) == " | ".join(truncated(float(p["fa2"]["tflops"]) / float(p[peer]["tflops"]))
                                          for peer in ("fa2_ch6", "sdpa_flash", "sdpa_cudnn"))


def test_the_readme_links_the_runs_page():
    assert "(book/results/runs.md)" in README


# -- book/results/runs.md -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HEADLINE_RUNS))
def test_each_headline_run_is_its_csv(name):
    assert headline_row(name) in RUNS


@pytest.mark.parametrize("name", list(REFERENCE_RUNS))
def test_each_reference_run_is_its_csv(name):
    assert reference_row(name) in RUNS


def test_the_shipped_tables_headline_runs_are_summed_up():
    """The sentence under the headline table: the runs with the shipped table, their ranges, and how many had
    every shape at or above 0.95× cuDNN."""
    shipped = [name for name, table in HEADLINE_RUNS.items() if table.endswith("(shipped)")]
    money, short, geo, every = [], [], [], 0
    for name in shipped:
        rows = read_rows(RESULTS / f"{name}.csv")
        at = by_shape(rows)
        money.append(float(ratio(at[(8, 32, 32, 2048, 128, True, "bf16")], "sdpa_cudnn")))
        short.append(float(ratio(at[(32, 32, 32, 512, 128, True, "bf16")], "sdpa_cudnn")))
        s = summarize(rows, "sdpa_cudnn")
        geo.append(float(truncated(s["geomean"])))
        every += float(truncated(s["min"])) >= 0.95
    text = RUNS.replace("\n", " ")
    assert (f"The {len(shipped)} runs with the shipped table: geometric mean {min(geo):.3f}–{max(geo):.3f}× cuDNN, "
            f"the money shot {min(money):.3f}–{max(money):.3f}×, (32, 32, 512, 128) causal "
            f"{min(short):.3f}–{max(short):.3f}×; every shape at or above 0.95× cuDNN in {every} of "
            f"{len(shipped)}") in text


def test_the_money_spread_sentence_is_the_two_headline_v0312_runs():
    a = by_shape(read_rows(RESULTS / "headline_v0312.csv"))
    b = by_shape(read_rows(RESULTS / "headline_v0312_run2.csv"))
    moved = max(abs(float(b[k]["sdpa_cudnn"]["ms"]) / float(a[k]["sdpa_cudnn"]["ms"]) - 1) for k in a)
    assert f"cuDNN's time at one shape moved {math.floor(moved * 1000) / 10:.1f} %" in RUNS.replace("\n", " ")


def test_the_reference_outlier_is_named_with_its_three_rounds():
    rows = read_rows(RESULTS / "reference.csv")
    row = by_shape(rows)[(1, 16, 16, 512, 64, False, "fp16")]["fa2"]
    rounds = sorted(float(ms) * 1000 for ms in row["round_ms"].split())
    assert "three rounds took " + ", ".join(f"{us:.1f}" for us in rounds[:-1]) + f" and {rounds[-1]:.1f} µs" \
        in RUNS.replace("\n", " ")


def test_the_gluon_details_are_the_interleaved_runs_and_reference_csv():
    """runs.md's Gluon section: the shipped config's medians in the table's interleaved runs at the money shot,
    and fa2.attention over chapter 6's kernel timed beside it in the reference run."""
    from fa2.gluon.dispatch import nearest_family
    table = gluon_table()
    family = next(f for f in table["families"] if (f["D"], f["dtype"], f["causal"], f["N"], f["BH"]) ==
                  (128, "bf16", True, 2048, 256))
    chosen, ratios = family["interleaved_provider"], []
    for name in table["interleaved"]:
        rounds = [r for r in csv.DictReader(open(RESULTS / name)) if (r["B"], r["N"]) == ("8", "2048")]
        median = {p: statistics.median(float(r["ms"]) for r in rounds if r["provider"] == p)
                  for p in (chosen, "fa2_ch6", "sdpa_cudnn")}
        ratios.append((truncated(median["fa2_ch6"] / median[chosen]),
                       truncated(median["sdpa_cudnn"] / median[chosen])))
    (ch6_a, cudnn_a), (ch6_b, cudnn_b) = ratios
    text = RUNS.replace("\n", " ")
    assert (f"`{chosen.removeprefix('gluon_')}`: medians {ch6_a}× and {ch6_b}× chapter 6's kernel ({cudnn_a}× and "
            f"{cudnn_b}× cuDNN's)") in text
    assert f"[`{table['interleaved'][0]}`]({table['interleaved'][0]})" in RUNS
    assert f"At the headline shape it was {truncated(family['speedup'])}× chapter 6's kernel" in text
    per = []
    for key, providers in by_shape(read_rows(RESULTS / "reference.csv")).items():
        B, H, Hkv, N, D, causal, dtype = key
        f = nearest_family(table["families"], D, dtype, causal, N, B * H)
        if f is not None and f["rung"] is not None and Hkv == H:
            per.append(float(providers["fa2_ch6"]["ms"]) / float(providers["fa2"]["ms"]))
    geomean = math.exp(sum(map(math.log, per)) / len(per))
    assert (f"`fa2.attention` ran {truncated(min(per))}–{truncated(max(per))}× chapter 6's kernel timed beside it "
            f"at those {len(per)} shapes (geometric mean {truncated(geomean)})") in text


def test_the_two_per_sm_sentence_is_the_table_and_both_reference_runs():
    """(8, 32, 512, 128) causal: the table's interleaved verdicts, and fa2.attention's speed over cuDNN's there in
    the reference run and in the one before (reference_v0316.csv), bf16 and fp16."""
    table = gluon_table()
    at = {f["dtype"]: f for f in table["families"] if (f["D"], f["causal"], f["N"], f["BH"]) == (128, True, 512, 256)}
    assert {f["interleaved_provider"] for f in at.values()} == {"gluon_r3_m64n64b2_persistent_split_x2"}

    def speed(name, dtype):
        return ratio(by_shape(read_rows(RESULTS / name))[(8, 32, 32, 512, 128, True, dtype)], "sdpa_cudnn")
    assert (f"{truncated(at['bf16']['interleaved_speedup'])}× chapter 6's kernel in the worst of "
            f"{at['bf16']['interleaved']} interleaved runs in bf16, {truncated(at['fp16']['interleaved_speedup'])}× "
            f"in the worse of {at['fp16']['interleaved']} in fp16; the reference run timed `fa2.attention` there at "
            f"{speed('reference.csv', 'bf16')}× and {speed('reference.csv', 'fp16')}× cuDNN's speed "
            f"({speed('reference_v0316.csv', 'bf16')}× and {speed('reference_v0316.csv', 'fp16')}× with the table "
            f"before)") in RUNS.replace("\n", " ")


def test_the_window_runs_are_their_csvs():
    for name in ("window", "window_run3", "window_run4"):
        flex, rate = window_ratios(name)
        assert f"| [`{name}.csv`]({name}.csv) | {flex}× | {rate} |" in RUNS, name


if __name__ == "__main__":
    for name in HEADLINE_RUNS:
        print(headline_row(name))
    print()
    for name in REFERENCE_RUNS:
        print(reference_row(name))


def us_text(us):
    """A time as the bench prints it: four significant figures (6.588, 17.05, 181.9, 5407)."""
    return f"{us:.4g}"


def h100_decode_rows():
    """book/results/h100.md's decode table, computed from decode_h100.csv: one '| B | N | ... |' line per contiguous
    shape (peer / fa2: the fastest peer's time over fa2's; paged columns: paged time / contiguous time)."""
    rows = {(r["layout"], int(r["B"]), int(r["N"]), r["provider"]): r
            for r in csv.DictReader(open(RESULTS / "decode_h100.csv")) if r["check"] in ("ok", "n/a")}
    assert {r["device"] for r in rows.values()} == {"NVIDIA H100 80GB HBM3"}
    us = {k: float(r["gpu_us"]) for k, r in rows.items()}
    lines = []
    for (_, B, N, _) in sorted(k for k in us if k[0] == "contiguous" and k[3] == "fa2"):
        fa2 = us[("contiguous", B, N, "fa2")]
        cudnn, flash = us[("contiguous", B, N, "sdpa_cudnn")], us[("contiguous", B, N, "sdpa_flash")]
        paged = [truncated(us[(f"paged{p}", B, N, "fa2")] / fa2) for p in (16, 256)]
        lines.append(f"| {B} | {N // 1024}k | {us_text(fa2)} | {us_text(cudnn)} | {us_text(flash)} | "
                     f"{truncated(min(cudnn, flash) / fa2)} | {paged[0]} | {paged[1]} |")
    return lines


def test_the_h100_decode_table_is_decode_h100_csv():
    page = (RESULTS / "h100.md").read_text()
    for line in h100_decode_rows():
        assert line in page, line


def read_ceiling_times():
    """{(B, N): {reader: median µs}} of read_ceiling_h100.csv (its readers, cudnn and fa2_decode), every reader's
    check passed."""
    rows = list(csv.DictReader(open(RESULTS / "read_ceiling_h100.csv")))
    assert {r["device"] for r in rows} == {"NVIDIA H100 80GB HBM3"}
    assert {r["check"] for r in rows if r["reader"] not in ("cudnn", "fa2_decode")} == {"ok"}
    shapes = {}
    for r in rows:
        shapes.setdefault((int(r["B"]), int(r["N"])), {})[r["reader"]] = float(r["gpu_us"])
    return shapes


def read_ceiling_rows():
    """book/results/read_ceiling.md's table from read_ceiling_h100.csv: per shape the fastest read-only kernel, its
    time, cuDNN's, fa2.decode's, fastest reader / cuDNN, cuDNN / fa2 and torch.sum's time."""
    lines = []
    for (B, N), us in read_ceiling_times().items():
        cudnn, fa2 = us.pop("cudnn"), us.pop("fa2_decode")
        best = min(us, key=us.get)
        gb = DecodeShape(B, N).kv_bytes() / 1e9
        lines.append(f"| {B} | {N // 1024}k | {gb:.3f} | `{best}` | {us_text(us[best])} | {us_text(cudnn)} | "
                     f"{us_text(fa2)} | {truncated(us[best] / cudnn)} | {truncated(cudnn / fa2)} | "
                     f"{us_text(us['torch_sum'])} |")
    return lines


def test_the_read_ceiling_table_is_its_csv():
    page = (RESULTS / "read_ceiling.md").read_text()
    for line in read_ceiling_rows():
        assert line in page, line


def test_the_read_ceiling_percentages_are_its_csv():
    """read_ceiling.md's verdict and the README's line: how much less time the fastest reader took than cuDNN, and
    how much more fa2.decode took, in per cent truncated to two places."""
    shapes = read_ceiling_times()
    pct = lambda x: f"{math.floor(x * 10000) / 100:.2f}"
    gain, behind = {}, {}
    for shape, us in shapes.items():
        cudnn, fa2 = us.pop("cudnn"), us.pop("fa2_decode")
        gain[shape], behind[shape] = 1 - min(us.values()) / cudnn, fa2 / cudnn - 1
    page = (RESULTS / "read_ceiling.md").read_text().replace("\n", " ")
    wide = [s for s in shapes if s[0] in (8, 32)]
    assert f"at B = 32, within {pct(max(gain[s] for s in wide if s[0] == 32))} % of the fastest reader" in page
    assert gain[(32, 8192)] < 0 and "at 8k keys none of the 22 was faster than cuDNN" in page
    assert f"at B = 8, within {pct(gain[(8, 32768)])} % (32k keys) and {pct(gain[(8, 131072)])} % (128k keys)" in page
    span = f"{pct(min(behind[s] for s in wide))}–{pct(max(behind[s] for s in wide))} %"
    assert f"`fa2.decode` took {span} more time than cuDNN at these five shapes" in page
    assert f"the H100's ({span})" in page
    assert f"from one another: 0–{pct(max(gain[s] for s in wide))} %" in page
    assert (f"the fastest took {pct(gain[(1, 131072)])} % less time than cuDNN there, and `fa2.decode` "
            f"{pct(behind[(1, 131072)])} % more") in page
    assert (f"22 kernels that only read the cache took at most {pct(max(gain[s] for s in wide))} % less time than "
            f"cuDNN's decode at B = 8 and 32") in README.replace("\n", " ").replace("   ", " ").replace("  ", " ")
    assert len(shapes[(32, 8192)]) == 22                   # the readers the page counts
    most = pct(max(gain[s] for s in wide))
    for stem, phrases in (("09_flash_decoding", [f"cuDNN's decode within {most} % of the fastest",
                                                 f"took more than {most} % less time than cuDNN's decode"]),
                          ("11_benchmarks", [f"took at most {most} % less time than cuDNN's decode"])):
        cells = json.loads((ROOT / "book" / f"{stem}.ipynb").read_text())["cells"]
        text = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        text = " ".join(text.split())
        for phrase in phrases:
            assert phrase in text, (stem, phrase)
