"""fa2.interleaved: medians per shape of a run of interleaved rounds, and the side-by-side table of two runs."""
import csv

from fa2.interleaved import medians, side_by_side

FIELDS = ["B", "H", "N", "D", "dtype", "causal", "round", "provider", "ms"]


def write_run(path, times):
    """A gpu/money_ab.py CSV: times {(B, H, N, D): {provider: [ms of each round]}}."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for (B, H, N, D), providers in times.items():
            for provider, rounds in providers.items():
                for r, ms in enumerate(rounds):
                    writer.writerow(dict(B=B, H=H, N=N, D=D, dtype="bf16", causal="True", round=r,
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
