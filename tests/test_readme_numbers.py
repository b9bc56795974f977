"""The README's numbers are the CSVs' numbers: every figure in its headline table and its one-line summary of each
sweep is recomputed here from the file it cites, formatted the same way (ratios truncated, never rounded up), and
must appear in the README verbatim. A re-measured CSV without an updated README fails here."""
import csv
import math
import re
import statistics
from pathlib import Path

import pytest

from fa2.bench import by_shape, read_rows, summarize, truncated

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "book" / "results"
README = (ROOT / "README.md").read_text()


def money_rows(name):
    rows = {row["provider"]: row for row in read_rows(RESULTS / f"{name}.csv")}
    assert {"fa2", "sdpa_flash", "sdpa_cudnn"} <= set(rows)
    return rows


def ratio(rows, peer):
    return truncated(float(rows["fa2"]["tflops"]) / float(rows[peer]["tflops"]))


def test_the_money_table_is_money_csv():
    rows = money_rows("money")
    fa2 = rows["fa2"]
    assert f"| **fa2 (this book, Triton)** | {float(fa2['ms']):.3f} | {float(fa2['tflops']):.1f} | |" in README
    for provider, row in rows.items():
        if provider != "fa2":
            cells = rf"\| {row['label'].split(' (')[0]}[^|]* \| {float(row['ms']):.3f} \| {float(row['tflops']):.1f} \| "
            assert re.search(cells + rf"(\*\*)?{ratio(rows, provider)}(\*\*)? \|", README), provider


def test_the_second_run_is_money_run2_csv():
    first, second = money_rows("money"), money_rows("money_run2")
    line = (f"fa2 {float(second['fa2']['ms']):.3f} ms, FA2 {float(second['sdpa_flash']['ms']):.3f} ms, "
            f"cuDNN {float(second['sdpa_cudnn']['ms']):.3f} ms: {ratio(second, 'sdpa_flash')}× FA2 and "
            f"{ratio(second, 'sdpa_cudnn')}× cuDNN")
    assert line in README
    moved = {p: abs(float(second[p]["ms"]) / float(first[p]["ms"]) - 1) * 100 for p in ("fa2", "sdpa_flash", "sdpa_cudnn")}
    assert (f"fa2's time moved {math.ceil(moved['fa2'] * 10) / 10:.1f} % at most, FA2's "
            f"{moved['sdpa_flash']:.1f} % and cuDNN's {moved['sdpa_cudnn']:.1f} %") in README


def prefill_line(name):
    rows = read_rows(RESULTS / f"{name}.csv")
    flash, cudnn = summarize(rows, "sdpa_flash"), summarize(rows, "sdpa_cudnn")
    return (f"{flash['n']} shapes: {truncated(flash['min'])}–{truncated(flash['max'])}× FA2 (geometric mean "
            f"{truncated(flash['geomean'])}, {flash['at_least']} of {flash['n']} ≥ 1.2×), "
            f"{truncated(cudnn['min'])}–{truncated(cudnn['max'])}× cuDNN (geometric mean "
            f"{truncated(cudnn['geomean'])})")


@pytest.mark.parametrize("name", ["headline", "reference", "headdim"])
def test_each_prefill_sweep_line(name):
    assert f"[`{name}.csv`](book/results/{name}.csv), {prefill_line(name)}" in README


def test_the_reference_sweeps_shapes_below_1_2_are_named():
    rows = read_rows(RESULTS / "reference.csv")
    below = summarize(rows, "sdpa_flash")["below"]
    for shape, r in below:
        key = (shape.B, shape.H, shape.Hkv, shape.N, shape.D, shape.causal, shape.dtype)
        flash_us = float(by_shape(rows)[key]["sdpa_flash"]["ms"]) * 1000
        mask = "causal" if shape.causal else "non-causal"
        assert (f"({shape.B}, {shape.H}, {shape.N}, {shape.D}) {mask} {shape.dtype} at {truncated(r)}× "
                f"(FA2: {flash_us:.0f} µs)") in README


def test_the_decode_line_is_decode_csv():
    rows = [r for r in csv.DictReader(open(RESULTS / "decode.csv")) if r["check"] in ("ok", "n/a")]
    us = {(r["layout"], int(r["B"]), int(r["N"]), r["provider"]): float(r["gpu_us"]) for r in rows}
    fa2 = {k[:3]: v for k, v in us.items() if k[3] == "fa2"}
    contiguous = [k for k in fa2 if k[0] == "contiguous"]
    flash = [us[(*k, "sdpa_flash")] / fa2[k] for k in contiguous]
    cudnn = [us[(*k, "sdpa_cudnn")] / fa2[k] for k in contiguous]
    paged = [fa2[k] / fa2[("contiguous", *k[1:])] for k in fa2 if k[0] != "contiguous"]
    pct = next(r["pct_of_copy"] for r in rows if r["provider"] == "fa2" and r["layout"] == "contiguous"
               and r["B"] == "1" and r["N"] == "131072")
    line = (f"B = 1 with 128k keys at {pct} % of a device copy of the same bytes, B = 1 with 8k keys in "
            f"{fa2[('contiguous', 1, 8192)]:.2f} µs; FA2's time / fa2's {truncated(min(flash))}–"
            f"{truncated(max(flash))}, cuDNN's {truncated(min(cudnn))}–{truncated(max(cudnn))}; paged caches "
            f"{truncated(min(paged))}–{truncated(max(paged))}× the contiguous time")
    assert line in README


def test_the_varlen_and_window_line_is_their_csvs():
    varlen = {r["provider"]: float(r["tflops"]) for r in csv.DictReader(open(RESULTS / "varlen.csv"))}
    window = list(csv.DictReader(open(RESULTS / "window.csv")))
    windowed = {r["provider"]: float(r["tflops"]) for r in window if r["window"]}
    plain = {r["provider"]: float(r["tflops"]) for r in window if not r["window"]}
    line = (f"{truncated(varlen['fa2'] / varlen['flex'])}× FlexAttention and "
            f"{truncated(varlen['fa2'] / varlen['sdpa_padded'])}× FA2 on the zero-padded batch; a 4096-token "
            f"window over 32k tokens {truncated(windowed['fa2'] / windowed['flex'])}× FlexAttention, at "
            f"{truncated(windowed['fa2'] / plain['fa2'])} of plain causal fa2's rate on visible scores")
    assert line in README


def test_the_gluon_line_is_the_shipped_table_and_gluon_sweep_csv():
    import json
    table = json.loads((ROOT / "fa2" / "configs" / "NVIDIA_H200.gluon.json").read_text())
    swept = [f for f in table["families"] if not f.get("interleaved_only")]     # the reference run's shapes
    between = [f for f in table["families"] if f.get("interleaved_only") and f["rung"] is not None]
    gluon = [f for f in swept if f["rung"] is not None]
    speedups = [f["speedup"] for f in gluon]
    geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
    assert (f"`fa2.attention` runs it at {len(gluon)} of the {len(swept)} shapes measured, where it was "
            f"{truncated(min(speedups))}–{truncated(max(speedups))}× chapter 6's kernel (geometric mean "
            f"{truncated(geomean)}), and at {len(between)} shapes between them that only interleaved runs "
            f"timed") in README
    family = next(f for f in table["families"] if (f["D"], f["dtype"], f["causal"], f["N"], f["BH"]) ==
                  (128, "bf16", True, 2048, 256))
    assert f"At the headline shape that run timed it at {truncated(family['speedup'])}× chapter 6's kernel" in README
    chosen, ratios = family["interleaved_provider"], []
    for name in table["interleaved"]:
        rounds = [r for r in csv.DictReader(open(RESULTS / name)) if (r["B"], r["N"]) == ("8", "2048")]
        median = {p: statistics.median(float(r["ms"]) for r in rounds if r["provider"] == p)
                  for p in (chosen, "fa2_ch6", "sdpa_cudnn")}
        ratios.append((truncated(median["fa2_ch6"] / median[chosen]),
                       truncated(median["sdpa_cudnn"] / median[chosen])))
    assert family["rung"] == 4 and f"[`{table['interleaved'][0]}`](book/results/{table['interleaved'][0]})" in README
    (ch6_a, cudnn_a), (ch6_b, cudnn_b) = ratios
    assert (f"`{chosen.removeprefix('gluon_')}`) medians {ch6_a}× and {ch6_b}× chapter 6's ({cudnn_a}× and "
            f"{cudnn_b}× cuDNN's)") in README.replace("\n", " ")


def test_the_order_caveat_is_the_order_study():
    """The headline section quotes the fixed-order runs of book/results/money_order.md, fa2 first and cuDNN
    first (the first run of each)."""
    fa2_first, cudnn_first = money_rows("order_money_fa2_first_1"), money_rows("order_money_sdpa_cudnn_first_1")
    assert [r["provider"] for r in read_rows(RESULTS / "order_money_fa2_first_1.csv")][0] == "fa2"
    assert [r["provider"] for r in read_rows(RESULTS / "order_money_sdpa_cudnn_first_1.csv")][0] == "sdpa_cudnn"
    assert (f"gave fa2 {ratio(fa2_first, 'sdpa_cudnn')}× cuDNN when fa2 came first and "
            f"{ratio(cudnn_first, 'sdpa_cudnn')}× when cuDNN did") in README.replace("\n", " ")
    assert all(row["rounds"] == "5" for row in read_rows(RESULTS / "money.csv"))


def test_the_gluon_dispatch_line_is_reference_csv():
    """fa2 (with the Gluon dispatch) over chapter 6's kernel, timed side by side in the reference run, at the
    shapes the shipped Gluon table sends to the Gluon kernel."""
    import json
    from fa2.gluon.dispatch import nearest_family
    families = json.loads((ROOT / "fa2" / "configs" / "NVIDIA_H200.gluon.json").read_text())["families"]
    ratios = []
    for key, providers in by_shape(read_rows(RESULTS / "reference.csv")).items():
        B, H, Hkv, N, D, causal, dtype = key
        family = nearest_family(families, D, dtype, causal, N, B * H)
        if family is not None and family["rung"] is not None and Hkv == H:
            ratios.append(float(providers["fa2_ch6"]["ms"]) / float(providers["fa2"]["ms"]))
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    assert (f"in the reference run `fa2.attention` ran {truncated(min(ratios))}–{truncated(max(ratios))}× chapter "
            f"6's kernel timed beside it at those {len(ratios)}") in README.replace("\n", " ")
    assert f"shapes (geometric mean {truncated(geomean)};" in README


def test_the_count_of_shapes_where_cudnn_is_faster_is_reference_csv():
    shapes = by_shape(read_rows(RESULTS / "reference.csv"))
    slower = sum(float(p["fa2"]["ms"]) > float(p["sdpa_cudnn"]["ms"]) for p in shapes.values())
    assert f"Hopper kernel is faster than fa2 at many prefill shapes: at {slower} of the reference sweep's " \
           f"{len(shapes)}." in README.replace("\n", " ")


def test_the_two_per_sm_sentence_is_the_table_and_both_reference_runs():
    """The 0.3.17 sentence: the table's interleaved verdicts at (8, 32, 512, 128) causal, and fa2.attention's speed
    over cuDNN's there in this reference run and in the one before (reference_v0316.csv), bf16 and fp16."""
    import json
    table = json.loads((ROOT / "fa2" / "configs" / "NVIDIA_H200.gluon.json").read_text())
    at = {f["dtype"]: f for f in table["families"] if (f["D"], f["causal"], f["N"], f["BH"]) == (128, True, 512, 256)}
    assert {f["interleaved_provider"] for f in at.values()} == {"gluon_r3_m64n64b2_persistent_split_x2"}

    def speed(name, dtype):
        return ratio(by_shape(read_rows(RESULTS / name))[(8, 32, 32, 512, 128, True, dtype)], "sdpa_cudnn")
    assert (f"1.254× chapter 6's kernel in the worst of {at['bf16']['interleaved']} interleaved runs in bf16, "
            f"{truncated(at['fp16']['interleaved_speedup'])}× in the worse of {at['fp16']['interleaved']} in fp16, "
            f"where the reference run timed `fa2.attention` at {speed('reference.csv', 'bf16')}× and "
            f"{speed('reference.csv', 'fp16')}× cuDNN's speed ({speed('reference_v0316.csv', 'bf16')}× and "
            f"{speed('reference_v0316.csv', 'fp16')}× with the table before") in README.replace("\n", " ")
    assert truncated(at["bf16"]["interleaved_speedup"]) == "1.254"


@pytest.mark.parametrize("name", ["headline_v0317", "headline_v0317_run5"])
def test_the_fourth_and_fifth_headline_runs_are_their_csvs(name):
    rows = read_rows(RESULTS / f"{name}.csv")
    flash, cudnn = summarize(rows, "sdpa_flash"), summarize(rows, "sdpa_cudnn")
    at = lambda B, H, N, D: by_shape(rows)[(B, H, H, N, D, True, "bf16")]
    assert (f"[`{name}.csv`](book/results/{name}.csv): {truncated(flash['min'])}–"
            f"{truncated(flash['max'])}× FA2 (geometric mean {truncated(flash['geomean'])}), {truncated(cudnn['min'])}–"
            f"{truncated(cudnn['max'])}× cuDNN (geometric mean {truncated(cudnn['geomean'])}), (32, 32, 512, 128) causal "
            f"at {ratio(at(32, 32, 512, 128), 'sdpa_cudnn')}× and the money shot at "
            f"{ratio(at(8, 32, 2048, 128), 'sdpa_cudnn')}×") in README


def test_the_third_reference_half_run_is_reference_a_v0317_run3_csv():
    rows = read_rows(RESULTS / "reference_a_v0317_run3.csv")
    flash, cudnn = summarize(rows, "sdpa_flash"), summarize(rows, "sdpa_cudnn")
    outlier = by_shape(rows)[(1, 16, 16, 512, 64, False, "fp16")]
    assert (f"at {ratio(outlier, 'sdpa_cudnn')}× cuDNN and {ratio(outlier, 'sdpa_flash')}× FA2 "
            f"([`reference_a_v0317_run3.csv`](book/results/reference_a_v0317_run3.csv): its {cudnn['n']} shapes "
            f"{truncated(flash['min'])}–{truncated(flash['max'])}× FA2, {truncated(cudnn['min'])}–"
            f"{truncated(cudnn['max'])}× cuDNN, geometric mean {truncated(cudnn['geomean'])})") in README
