"""The benchmark CLI: the tiny sweep end to end, the sweep definitions, and rows for broken or wrong providers."""
import csv
import shlex

import torch

from fa2 import bench

FAST = ["--rep-ms", "1", "--warmup-ms", "1"]


def read_rows(path):
    with open(path, newline="") as file:
        reader = csv.DictReader(file)
        return reader.fieldnames, list(reader)


def test_tiny_sweep_writes_checked_csv_and_plot(tmp_path, capsys):
    argv = ["--sweep", "tiny", "--out", str(tmp_path), "--providers", "fa2,sdpa_math", *FAST]
    assert bench.main(argv) == 0
    columns, rows = read_rows(tmp_path / "tiny.csv")
    assert columns == bench.COLUMNS
    shapes = bench.tiny_sweep()
    runs = {(r["B"], r["H"], r["Hkv"], r["N_Q"], r["N_KV"], r["D"], r["dtype"], r["causal"], r["provider"])
            for r in rows}
    assert len(rows) == len(runs) == 2 * len(shapes)
    assert {r["provider"] for r in rows} == {"fa2", "sdpa_math"}
    for row in rows:
        assert row["check"] == "ok" and row["error"] == "", row
        assert float(row["tflops"]) > 0 and float(row["ms"]) > 0 and float(row["rel_err"]) <= bench.MAX_REL_ERR
        assert row["sweep"] == "tiny" and row["device"] and row["torch"] == torch.__version__
        assert row["command"] == "python -m fa2.bench " + shlex.join(argv)
    assert (tmp_path / "tiny.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "fa2/sdpa_math: geometric mean" in printed
    # --from-csv redraws the plot and reprints the table of that run without measuring anything
    (tmp_path / "tiny.png").unlink()
    assert bench.main(["--from-csv", str(tmp_path / "tiny.csv")]) == 0
    assert (tmp_path / "tiny.png").stat().st_size > 10_000
    table = [line for line in capsys.readouterr().out.splitlines() if "geometric mean" in line]
    assert table == [line for line in printed.splitlines() if "geometric mean" in line]


def test_ratios_are_truncated_never_rounded_up():
    assert bench.truncated(1.19996) == "1.199"
    assert bench.truncated(0.5559) == "0.555"
    assert bench.truncated(1.4999, 2) == "1.49"


def test_sweep_definitions():
    reference = bench.reference_sweep()
    assert all(s.nbytes() <= bench.MAX_SHAPE_BYTES for s in reference)
    assert len(reference) == 3 * 4 * 2 * 2 * 2 == len(set(reference))          # nothing is over 40 GiB
    assert {(s.D, s.H) for s in reference} == {(128, 32), (64, 16)}
    assert {s.B for s in reference} == {1, 8, 32} and {s.N for s in reference} == {512, 2048, 8192, 16384}
    assert all(s.Hkv == s.H for s in reference)
    assert bench.money_sweep() == [bench.Shape(B=8, H=32, Hkv=32, N=2048, D=128, causal=True, dtype="bf16")]
    assert {s.Hkv for s in bench.headline_sweep(hkv=8)} == {8}
    assert bench.Shape(8, 32, 32, 2048, 128, True, "bf16").tflops(1.0) == 4 * 8 * 32 * 2048**2 * 128 / 2 / 1e9


def test_broken_wrong_and_bnhd_providers(tmp_path, monkeypatch):
    def broken(shape):
        raise RuntimeError("no kernel for this shape\nsecond line")

    def wrong(shape):
        return lambda q, k, v: torch.full_like(q, float("nan"))

    def bnhd(shape):                  # like flash_attn: takes and returns (B, N, H, D)
        sdpa = bench.build_sdpa(shape)
        return lambda q, k, v: sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)

    peers = bench.all_providers()
    peers.update(broken=bench.Provider("broken", "Broken", broken), wrong=bench.Provider("wrong", "Wrong", wrong),
                 bnhd=bench.Provider("bnhd", "BNHD", bnhd, layout="bnhd"))
    monkeypatch.setattr(bench, "all_providers", lambda: peers)
    argv = ["--sweep", "one", "--out", str(tmp_path), "--providers", "bnhd,broken,wrong", "--no-plot", *FAST]
    monkeypatch.setitem(bench.SWEEPS, "one", lambda hkv=None: bench.tiny_sweep(hkv)[:1])   # one small shape
    monkeypatch.setattr(bench, "CPU_SWEEPS", ("tiny", "one"))
    assert bench.main(argv) == 1                                                    # a wrong output fails the run
    _, rows = read_rows(tmp_path / "one.csv")
    by_provider = {r["provider"]: r for r in rows}
    assert by_provider["bnhd"]["check"] == "ok" and float(by_provider["bnhd"]["rel_err"]) < 1e-2
    assert by_provider["broken"]["check"] == "error" and by_provider["broken"]["tflops"] == ""
    assert by_provider["broken"]["error"] == "RuntimeError: no kernel for this shape"
    assert by_provider["wrong"]["check"] == "fail" and by_provider["wrong"]["rel_err"] == "nan"
    assert not (tmp_path / "one.png").exists()


def test_gpu_sweep_on_cpu_stops_with_a_message_and_touches_nothing(tmp_path, capsys):
    import pytest
    from fa2 import runtime
    if runtime.DEVICE == "cuda":
        pytest.skip("a GPU runs every sweep")
    with pytest.raises(SystemExit) as stop:
        bench.main(["--sweep", "money", "--out", str(tmp_path)])
    assert stop.value.code == 2
    assert "needs a GPU" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_default_output_is_not_the_books_results():
    args = bench.parse_args(["--sweep", "tiny"])
    assert args.out.name == "bench-results" and "book" not in args.out.parts


def test_ladder_versions_are_providers(tmp_path, monkeypatch):
    """fa2@vN names a ladder version as a provider, checked and timed like the others (two of the tiny sweep's
    shapes, one causal fp16 and one full bf16: every version runs each under the interpreter)."""
    kept = ((True, "fp16"), (False, "bf16"))
    two = lambda hkv=None: [s for s in bench.tiny_sweep(hkv) if (s.causal, s.dtype) in kept and s.N == 64]
    monkeypatch.setitem(bench.SWEEPS, "tiny", two)
    assert len(two()) == 2
    argv = ["--sweep", "tiny", "--out", str(tmp_path), "--providers", "fa2@v0,fa2@v3,fa2", *FAST, "--no-plot"]
    assert bench.main(argv) == 0
    _, rows = read_rows(tmp_path / "tiny.csv")
    assert len(rows) == 3 * 2 and {r["provider"] for r in rows} == {"fa2@v0", "fa2@v3", "fa2"}
    assert all(r["check"] == "ok" for r in rows)


def test_rounds_rotate_the_order_and_keep_the_median(tmp_path, monkeypatch):
    """--rounds R: every provider of a shape is checked, then timed once per round, round r starting at the r-th
    provider; "ms" is the median, "round_ms" every round's time in round order. (A stand-in timer returns 1, 2,
    3, ... in call order: with two providers and three rounds the order is a b, b a, a b.)"""
    ticks = iter(range(1, 10_000))
    monkeypatch.setattr(bench, "time_ms", lambda fn, inputs, warmup, rep: float(next(ticks)))
    argv = ["--sweep", "tiny", "--out", str(tmp_path), "--providers", "fa2,sdpa_math", "--rounds", "3", "--no-plot"]
    assert bench.main(argv) == 0
    _, rows = read_rows(tmp_path / "tiny.csv")
    assert len(rows) == 2 * len(bench.tiny_sweep())
    for k in range(len(bench.tiny_sweep())):
        first, second = rows[2 * k], rows[2 * k + 1]
        base = 6 * k
        assert (first["provider"], second["provider"]) == ("fa2", "sdpa_math")
        assert first["round_ms"] == f"{base + 1} {base + 4} {base + 5}" and float(first["ms"]) == base + 4
        assert second["round_ms"] == f"{base + 2} {base + 3} {base + 6}" and float(second["ms"]) == base + 3
        assert first["rounds"] == second["rounds"] == "3" and first["check"] == second["check"] == "ok"


def test_money_headline_and_dropin_sweeps_are_timed_in_rounds_by_default():
    assert bench.SWEEP_ROUNDS == {"money": 5, "headline": 3, "varlen": 3, "window": 3, "decode": 3}
    assert bench.parse_args(["--sweep", "tiny"]).rounds is None


def test_max_n_and_min_n_split_a_sweep_in_two():
    """--max-n and --min-n pick the sweep's shapes by N: a long sweep can be run in two parts that together hold
    every shape once."""
    every = bench.parse_args(["--sweep", "tiny"]).shapes
    cut = sorted({s.N for s in every})[len({s.N for s in every}) // 2]
    low = bench.parse_args(["--sweep", "tiny", "--max-n", str(cut - 1)]).shapes
    high = bench.parse_args(["--sweep", "tiny", "--min-n", str(cut)]).shapes
    assert low and high and sorted(low + high, key=every.index) == every
    assert all(s.N < cut for s in low) and all(s.N >= cut for s in high)


def test_every_provider_keeps_one_color_across_shapes():
    """A provider without an entry in PROVIDER_COLORS (fa2_ch6, the ladder's fa2@vN) once took matplotlib's next
    color for every bar, so its bars changed color from shape to shape and its legend entry matched none of them."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["fa2", "fa2_ch6", "fa2@v3", "sdpa_flash", "sdpa_cudnn"]
    groups = []
    for N in (512, 1024, 2048):
        row = {name: dict(provider=name, label=name, check="ok", tflops=str(100 + i + N / 100))
               for i, name in enumerate(names)}
        groups.append((bench.Shape(1, 2, 2, N, 64, True, "bf16"), row))
    fig, ax = plt.subplots()
    bench.plot_panel(ax, groups, names, "sdpa_flash")
    colors = {}
    for bars in ax.containers:                                                # one ax.bar call each
        colors.setdefault(bars.get_label(), set()).update(patch.get_facecolor() for patch in bars)
    plt.close(fig)
    assert all(len(c) == 1 for c in colors.values()), colors
    assert len({next(iter(c)) for c in colors.values()}) == len(names)       # and no two providers share one
