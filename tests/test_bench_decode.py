"""The decode benchmark (fa2/bench_decode.py) end to end on CPU-sized shapes: checked rows, CSV, plot."""
import csv
import importlib.util
import re
from pathlib import Path

import pytest
import torch

from fa2 import bench_decode, runtime


def test_tiny_decode_sweep_writes_checked_rows(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_decode, "SPLIT_CANDIDATES", (1, 5))
    monkeypatch.setattr(bench_decode, "CONFIG_CANDIDATES", [dict(block_n=32, num_warps=4, num_stages=2)])
    monkeypatch.setattr(bench_decode, "PAGED_CONFIG_CANDIDATES", [dict(block_n=32, num_warps=4, num_stages=4)])
    rows = bench_decode.run_sweep(tmp_path, shapes=bench_decode.tiny(), names=["copy", "fa2"], command="test")
    with open(tmp_path / "decode.csv", newline="") as file:
        reader = csv.DictReader(file)
        assert reader.fieldnames == bench_decode.COLUMNS
        written = list(reader)
    contiguous = bench_decode.tiny()[0]
    picks = bench_decode.heuristic_picks(bench_decode.make_inputs(contiguous, torch.Generator(runtime.DEVICE)))
    split_rows = len({1, 5} | set(picks.values()))          # the split counts, and what the heuristic would pick
    assert len(written) == len(rows) == 2 * 2 + split_rows + 1 + 1   # copy + fa2 per shape, tuning rows
    for row in written:
        assert row["error"] == "" and float(row["gpu_us"]) > 0 and float(row["gbs"]) > 0, row
        if row["provider"] != "copy":
            assert row["check"] == "ok" and float(row["rel_err"]) <= bench_decode.MAX_REL_ERR, row
    fa2_rows = [r for r in written if r["provider"] == "fa2"]
    assert {r["layout"] for r in fa2_rows} == {"contiguous", "paged16"}
    assert all(float(r["rel_err_ragged"]) <= bench_decode.MAX_REL_ERR for r in fa2_rows)
    tuned_splits = {r["num_splits"] for r in written if r["provider"] == "fa2_tune"}
    assert tuned_splits >= {"1", "5"} | {str(p) for p in picks.values()}
    if importlib.util.find_spec("matplotlib"):       # the GPU image may not have it: the run then skips the plot
        assert (tmp_path / "decode.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "tuning: fa2.decode" in printed and "paged16" in printed


def test_bytes_and_family():
    shape = bench_decode.DecodeShape(B=1, N=8192)
    assert shape.kv_bytes() == 2 * 8 * 8192 * 128 * 2          # K and V, bf16
    family = bench_decode.family()
    assert len(family) == 3 * 5 * 3 and {s.layout for s in family} == {"contiguous", "paged16", "paged256"}


@pytest.mark.skipif(runtime.DEVICE == "cuda", reason="the interpreter's split rule splits this 48-key cache; a "
                    "GPU's does not (one split: nothing to fuse or overlap)")
def test_fused_and_pdl_providers_time_beside_two_launches(tmp_path, capsys):
    """`--sweep decode` runs fa2_fused (the fused combine), fa2_pdl and fa2_nopdl (PDL always and never; on the
    CPU the same launch as fa2) beside fa2 in the same run, all checked (ragged too), each with a column of the
    summary."""
    names = ["fa2", "fa2_fused", "fa2_pdl", "fa2_nopdl"]
    assert set(names) <= set(bench_decode.providers())
    assert bench_decode.providers()["fa2_pdl"].config == dict(pdl=True)
    assert bench_decode.providers()["fa2_nopdl"].config == dict(pdl=False)
    shapes = [bench_decode.DecodeShape(1, 48, 0, Hq=4, Hkv=2, D=32)]
    rows = bench_decode.run_sweep(tmp_path, shapes=shapes, names=names, tune=False, plot_png=False)
    by_provider = {r["provider"]: r for r in rows}
    assert set(by_provider) == set(names)
    for row in by_provider.values():
        assert row["check"] == "ok" and float(row["rel_err_ragged"]) <= bench_decode.MAX_REL_ERR, row
        assert int(row["num_splits"]) > 1, "the tiny shape must split, or there is nothing to fuse or overlap"
    printed = capsys.readouterr().out
    assert "fused us" in printed and "pdl us" in printed and "no-pdl us" in printed
    assert "launch with PDL always (fa2_pdl)" in printed and "with PDL never (fa2_nopdl)" in printed
    assert "launch with the fused combine (fa2_fused)" in printed


def test_summary_of_pdl_rows(capsys):
    """The summary gives fa2_pdl a column beside fa2 and fa2_fused and the B=1 N=8k goal (rows of the H200's fused
    run, each fa2 row copied as an fa2_pdl row 0.9 us faster)."""
    from pathlib import Path
    rows = bench_decode.read_rows(Path(__file__).resolve().parents[1] / "book/results/decode_fused.csv")
    pdl = [dict(r, provider="fa2_pdl", gpu_us=f"{float(r['gpu_us']) - 0.9:.4g}")
           for r in rows if r["provider"] == "fa2"]
    bench_decode.print_summary(rows + pdl)
    printed = capsys.readouterr().out
    header = next(line for line in printed.splitlines() if line.lstrip().startswith("B "))
    assert header.split()[:5] == ["B", "N", "fa2", "us", "fused"] and "pdl us" in header
    fa2_8k = next(float(r["gpu_us"]) for r in rows
                  if r["provider"] == "fa2" and r["B"] == 1 and r["N"] == 8192 and r["layout"] == "contiguous")
    assert f"B=1 N=8k in <= 15 us GPU time with PDL always ({fa2_8k - 0.9:.1f} us)" in printed
    assert "B=1 N=8k in <= 15 us GPU time with the fused combine (" in printed


def test_goals_print_one_line_each(capsys):
    """The stored family sweep has 30 paged rows and 15 shapes: each goal is one line, the misses named in it
    (the book shows this summary; a line per row buried the paged misses among the MET lines)."""
    rows = bench_decode.read_rows(Path(__file__).resolve().parents[1] / "book/results/decode.csv")
    bench_decode.print_summary(rows)
    lines = capsys.readouterr().out.splitlines()
    paged = [line for line in lines if "within 10% of contiguous" in line]
    assert len(paged) == 1 and re.fullmatch(r"(MET |MISS) paged within 10% of contiguous: \d+ of 30(; missed at B=\d+ "
                                            r"N=\d+ paged\d+ \(1\.\d{3}x\).*)?", paged[0]), paged
    peers = [line for line in lines if "faster than every peer" in line]
    assert len(peers) == 1 and peers[0].startswith("MISS faster than every peer: ")
    pct = next(r["pct_of_copy"] for r in rows if r["provider"] == "fa2" and r["layout"] == "contiguous"
               and r["B"] == 1 and r["N"] == 131072)
    assert [line for line in lines if "B=1 N=128k" in line] == [
        f"{'MET ' if float(pct) >= 85 else 'MISS'} B=1 N=128k at >= 85% of the copy ({pct}%)"]
    assert len([line for line in lines if line.startswith(("MET", "MISS"))]) == 4


def test_summary_ratios_are_truncated(capsys):
    """The paged and peer/fa2 columns are cut, never rounded up (the book's rule, fa2.bench.truncated): a peer
    1.2079x fa2's time prints 1.207x, not 1.21x; a paged cache 1.0789x contiguous prints 1.078x, not 1.08x."""
    row = dict(B=1, N=1024, label="", gbs="1", pct_of_copy="1", host_us="1", check="ok", error="",
               rel_err="0", rel_err_ragged="0")
    rows = [dict(row, layout="contiguous", provider="fa2", gpu_us="1.0"),
            dict(row, layout="paged16", provider="fa2", gpu_us="1.0789"),
            dict(row, layout="paged256", provider="fa2", gpu_us="0.9999"),
            dict(row, layout="contiguous", provider="sdpa_cudnn", gpu_us="1.2079")]
    bench_decode.print_summary(rows)
    line = next(line for line in capsys.readouterr().out.splitlines() if line.lstrip().startswith("1 "))
    assert line.split()[-4:] == ["1.078x", "0.999x", "1.2", "1.207x"], line   # paged16, paged256, cuDNN, peer


def test_rounds_rotate_the_order_and_keep_the_median(tmp_path, monkeypatch):
    """rounds=R (fa2.bench --rounds; the decode sweep defaults to 3): each provider checked, then its GPU time
    taken once per round with the order rotated, the median kept (a stand-in timer returns 1, 2, 3, ... in call
    order; with copy and fa2 the order is copy fa2, fa2 copy, copy fa2); GB/s follows the median."""
    ticks = iter(range(1, 1000))
    calls = []
    monkeypatch.setattr(bench_decode, "gpu_time_us",
                        lambda fn, sets: (calls.append(fn) or float(next(ticks)), "stand-in"))
    shape = bench_decode.DecodeShape(1, 48, 0, Hq=4, Hkv=2, D=32)
    rows = bench_decode.run_sweep(tmp_path, shapes=[shape], names=["copy", "fa2"], tune=False, plot_png=False,
                                  rounds=3)
    by = {r["provider"]: r for r in rows}
    # ticks taken before the rounds (on a GPU build_copy first times its candidates, and after the rounds each
    # provider's L2-resident time takes one more): the rounds' six calls start there, in the rotated order
    t = int(by["copy"]["round_us"].split()[0]) - 1
    a, b, *_ = round_fns = calls[t:t + 6]
    assert a is not b and [fn is a for fn in round_fns] == [True, False, False, True, True, False]
    assert by["copy"]["round_us"] == f"{1 + t} {4 + t} {5 + t}" and float(by["copy"]["gpu_us"]) == 4 + t
    assert by["fa2"]["round_us"] == f"{2 + t} {3 + t} {6 + t}" and float(by["fa2"]["gpu_us"]) == 3 + t
    assert by["copy"]["rounds"] == by["fa2"]["rounds"] == 3
    assert float(by["fa2"]["gbs"]) == pytest.approx(shape.kv_bytes() / (3 + t) / 1e-6 / 1e9, rel=1e-4)
    assert by["fa2"]["check"] == "ok" and by["fa2"]["timer"] == "stand-in"
    with open(tmp_path / "decode.csv", newline="") as file:
        written = [r["round_us"] for r in csv.DictReader(file)]
    assert written == [f"{1 + t} {4 + t} {5 + t}", f"{2 + t} {3 + t} {6 + t}"]


def test_cli_decode_sweep_takes_providers(tmp_path, monkeypatch):
    """`python -m fa2.bench --sweep decode --providers copy,fa2` times only those (the book's family run leaves out
    the variants); an unknown name is an error naming it; without --providers every decode provider runs."""
    from fa2 import bench
    seen = []
    monkeypatch.setattr(runtime, "DEVICE", "cuda")          # the CLI refuses the decode sweep on a CPU
    monkeypatch.setattr(bench_decode, "run_sweep", lambda out, names=None, **kw: seen.append(names) or [])
    assert bench.main(["--sweep", "decode", "--providers", "copy,fa2", "--out", str(tmp_path)]) == 0
    assert bench.main(["--sweep", "decode", "--out", str(tmp_path)]) == 0
    assert seen == [["copy", "fa2"], None]
    with pytest.raises(SystemExit):
        bench.main(["--sweep", "decode", "--providers", "fa2,nonesuch", "--out", str(tmp_path)])
