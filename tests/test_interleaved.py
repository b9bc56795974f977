"""fa2.interleaved: medians per shape of a run of interleaved rounds, and the side-by-side table of two runs."""
import csv

from fa2.interleaved import medians, side_by_side

FIELDS = ["B", "H", "N", "D", "dtype", "causal", "round", "provider", "ms"]


def write_run(path, times, full=None):
    """A gpu/money_ab.py CSV: times {(B, H, N, D): {provider: [ms of each round]}}, causal; `full` the same for
    shapes timed without the mask."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for causal, timed in (("True", times), ("False", full or {})):
            for (B, H, N, D), providers in timed.items():
                for provider, rounds in providers.items():
                    for r, ms in enumerate(rounds):
                        writer.writerow(dict(B=B, H=H, N=N, D=D, dtype="bf16", causal=causal, round=r,
                                             provider=provider, ms=ms))


def test_medians_are_per_shape_and_provider_and_a_missing_file_says_so(tmp_path, capsys):
    write_run(tmp_path / "run.csv", {(8, 32, 2048, 128): {"a": [3.0, 1.0, 2.0]},
                                     (8, 16, 2048, 64): {"a": [5.0, 4.0, 9.0], "b": [1.0, 1.0]}})
    assert medians(tmp_path / "run.csv") == {(8, 32, 2048, 128): {"a": 2.0}, (8, 16, 2048, 64): {"a": 5.0, "b": 1.0}}
    assert medians(tmp_path / "missing.csv") == {}
    assert "missing.csv is not here" in capsys.readouterr().out


def test_side_by_side_prints_both_runs_with_truncated_ratios(tmp_path, capsys):
    """Both runs, shapes that share B and N apart (a D = 64 and a D = 128 one), before / after truncated: 1.0999
    prints as 1.099, never 1.100."""
    shapes = [(8, 32, 2048, 128), (8, 16, 2048, 64)]
    for i in (1, 2):
        write_run(tmp_path / f"gluon_t_ab_{i}.csv",
                  {s: {"sdpa_cudnn": [1.0], "gluon_old": [1.0999], "gluon_new": [1.0], "gluon_x": [0.5]}
                   for s in shapes})
    side_by_side("t", [("label", "old", "new")], "then", also=["x"], results=tmp_path)
    out = capsys.readouterr().out
    assert out.count("gluon_t_ab_") == 2 and out.count("(8, 16, 2048, 64) causal   cuDNN 1.0000 ms, x 0.5000 ms") == 2
    assert out.count("label 1.0999 ms, then 1.0000 ms: 1.099x, 1.000x cuDNN") == 4


def test_a_run_with_both_masks_keeps_them_apart(tmp_path, capsys):
    """A run that timed one shape causal and not (gpu/rung3_persistent.sh): medians of each mask on its own, and
    side_by_side(causal=False) prints the shape as non-causal."""
    for i in (1, 2):
        write_run(tmp_path / f"gluon_m_ab_{i}.csv", {(32, 32, 512, 128): {"sdpa_cudnn": [1.0], "gluon_a": [2.0]}},
                  full={(32, 32, 512, 128): {"sdpa_cudnn": [4.0], "gluon_a": [8.0]}})
    assert medians(tmp_path / "gluon_m_ab_1.csv") == {(32, 32, 512, 128): {"sdpa_cudnn": 1.0, "gluon_a": 2.0}}
    assert medians(tmp_path / "gluon_m_ab_1.csv", causal=False) == {
        (32, 32, 512, 128): {"sdpa_cudnn": 4.0, "gluon_a": 8.0}}
    side_by_side("m", [("a", "a", "a")], "->", results=tmp_path, causal=False)
    out = capsys.readouterr().out
    assert out.count("(32, 32, 512, 128) non-causal   cuDNN 4.0000 ms") == 2 and "0.500x cuDNN" in out


def test_side_by_side_prints_as_many_runs_as_asked(tmp_path, capsys):
    """runs=3 prints the third run too (gpu/own_down_table.sh made three); the default stays two."""
    for i in (1, 2, 3):
        write_run(tmp_path / f"gluon_r_ab_{i}.csv", {(32, 32, 512, 128): {"sdpa_cudnn": [1.0], "gluon_a": [float(i)]}})
    side_by_side("r", [("a", "a", "a")], "->", results=tmp_path, runs=3)
    out = capsys.readouterr().out
    assert [f"gluon_r_ab_{i}.csv" in out for i in (1, 2, 3)] == [True] * 3 and "3.0000 ms" in out
    side_by_side("r", [("a", "a", "a")], "->", results=tmp_path)
    assert "gluon_r_ab_3.csv" not in capsys.readouterr().out
