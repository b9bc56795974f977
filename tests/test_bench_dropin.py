"""The varlen and window benchmarks (fa2/bench_dropin.py) end to end on CPU-sized problems."""
import csv

import pytest
import torch

from fa2 import bench, bench_dropin, runtime
from fa2.chapters.varlen_reference import masked_attention_reference


@pytest.mark.parametrize("sweep", ["varlen", "window"])
def test_tiny_sweep_writes_checked_rows(sweep, tmp_path, capsys):
    names = ["fa2", "sdpa_padded", "sdpa_flash"]
    rows = bench_dropin.run_sweep(sweep, tmp_path, names, bench_dropin.tiny_problems(sweep), command="test",
                                  rep_ms=5)
    with open(tmp_path / f"{sweep}.csv", newline="") as file:
        reader = csv.DictReader(file)
        assert reader.fieldnames == bench_dropin.COLUMNS
        written = list(reader)
    assert len(written) == len(rows) == (2 if sweep == "varlen" else 3)   # each provider where it applies
    for row in written:
        assert row["check"] == "ok" and float(row["rel_err"]) <= bench_dropin.MAX_REL_ERR, row
        assert float(row["ms"]) > 0 and float(row["tflops"]) > 0 and row["command"] == "test"
    assert bench_dropin.exit_code(rows) == 0
    result = bench_dropin.summary(rows)
    if sweep == "window":
        assert result["window_vs_causal"] > 0
    printed = capsys.readouterr().out
    assert "fa2 / sdpa_" in printed


def test_a_wrong_output_fails_its_check(tmp_path, monkeypatch):
    every = bench_dropin.providers()
    build = every["fa2"].build

    def wrong(problem, x):
        fn, packed = build(problem, x)
        return (lambda: fn() * 1.1), packed

    monkeypatch.setattr(every["fa2"], "build", wrong)
    monkeypatch.setattr(bench_dropin, "providers", lambda: every)
    rows = bench_dropin.run_sweep("varlen", tmp_path, ["fa2"], bench_dropin.tiny_problems("varlen"), rep_ms=5)
    assert rows[0]["check"] == "fail" and bench_dropin.exit_code(rows) == 1


def test_visible_pairs_and_the_fixed_lengths():
    causal = bench_dropin.Problem("window", (10,), 1, 1, 16)
    assert causal.visible_pairs() == 55                                  # 1 + 2 + ... + 10
    windowed = bench_dropin.Problem("window", (10,), 1, 1, 16, window=(3, 0))
    assert windowed.visible_pairs() == 1 + 2 + 3 + 4 * 7                 # min(i, 3) + 1 keys per row
    lengths = bench_dropin.varlen_lengths()
    assert len(lengths) == 16 and all(128 <= n <= 4096 for n in lengths)
    assert lengths == bench_dropin.varlen_lengths()                      # the same draw every time
    assert bench_dropin.varlen_problems()[0].visible_pairs() == sum(n * (n + 1) // 2 for n in lengths)


def test_cli_knows_the_sweeps_and_their_providers():
    if runtime.DEVICE != "cuda":
        with pytest.raises(SystemExit):              # a GPU sweep refuses to start on the CPU
            bench.parse_args(["--sweep", "varlen"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--sweep", "window", "--providers", "nope", "--from-csv", "x.csv"])
    args = bench.parse_args(["--sweep", "window", "--providers", "fa2,flex", "--from-csv", "x.csv"])
    assert args.providers == ["fa2", "flex"]


def test_reference_rows_of_the_window_problem():
    """The window sweep checks blocks of rows against keys from the window's start: the same numbers as the
    whole reference."""
    problem = bench_dropin.Problem("window", (600,), 2, 2, 16, window=(50, 0))
    x = bench_dropin.make_inputs(problem, torch.Generator(runtime.DEVICE).manual_seed(0))
    rows, ref = bench_dropin.reference(problem, x)
    assert {0, 255, 300, 599} <= set(rows.tolist()) and len(rows) == 3 * bench_dropin.REFERENCE_ROWS
    full = masked_attention_reference(*(t.transpose(0, 1)[None] for t in (x.q, x.k, x.v)), True, None, (50, 0))
    torch.testing.assert_close(ref, full[0].transpose(0, 1)[rows])


def test_printed_ratios_are_truncated_never_rounded_up(capsys):
    """fa2 at 433.9 TFLOP/s over a peer at 323.9 is 1.33961...: printed 1.339, not 1.340; the window's rate
    400 / 433.9 = 0.92187 prints 0.921, not 0.922."""
    row = lambda provider, problem, tflops, window="": dict(
        sweep="window", provider=provider, label=provider, problem=problem, ms="1.0", tflops=str(tflops),
        check="ok", error="", window=window)
    bench_dropin.print_summary([row("fa2", "causal", 433.9), row("flex", "causal", 323.9),
                                row("fa2", "windowed", 400.0, "(8, 0)")])
    printed = capsys.readouterr().out
    assert "1.339x" in printed and "1.340x" not in printed
    assert "0.921" in printed and "0.922" not in printed


def test_the_window_sweep_separates_the_kernel_from_the_window(tmp_path, capsys):
    """Windowed calls run chapter 10's kernel, plain causal ones chapter 6's: `fa2_ch10` times chapter 10's kernel
    on the plain causal problem, so the window's rate can be set beside the same kernel's without a window."""
    rows = bench_dropin.run_sweep("window", tmp_path, ["fa2", "fa2_ch10"], bench_dropin.tiny_problems("window"),
                                  command="test", rep_ms=5)
    assert [(r["provider"], bool(r["window"])) for r in rows] == [("fa2", True), ("fa2", False),
                                                                   ("fa2_ch10", False)]
    assert all(r["check"] == "ok" for r in rows)
    result = bench_dropin.summary(rows)
    windowed, plain, ch10 = (float(r["tflops"]) for r in rows)
    assert result["window_vs_same_kernel"] == pytest.approx(windowed / ch10)
    assert result["window_vs_causal"] == pytest.approx(windowed / plain)
    assert "fa2 with the window / chapter 10's kernel plain causal" in capsys.readouterr().out


def test_rounds_rotate_the_order_and_keep_the_median(tmp_path, monkeypatch):
    """rounds=R (fa2.bench --rounds; the varlen and window sweeps default to 3): each provider checked, then timed
    once per round with the order rotated, its median kept (a stand-in timer returns 1, 2, 3, ... in call order)."""
    ticks = iter(range(1, 1000))
    monkeypatch.setattr(bench_dropin, "time_ms", lambda fn, warmup_ms, rep_ms: float(next(ticks)))
    problems = bench_dropin.tiny_problems("varlen")[:1]
    rows = bench_dropin.run_sweep("varlen", tmp_path, ["fa2", "sdpa_padded"], problems, rep_ms=5, rounds=3)
    by = {r["provider"]: r for r in rows}
    assert by["fa2"]["round_ms"] == "1 4 5" and float(by["fa2"]["ms"]) == 4 and by["fa2"]["rounds"] == 3
    assert by["sdpa_padded"]["round_ms"] == "2 3 6" and float(by["sdpa_padded"]["ms"]) == 3
    assert all(r["check"] == "ok" for r in rows)
