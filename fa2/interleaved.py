"""Runs of interleaved rounds (gpu/money_ab.py: every provider timed once per round, the order rotated each
round) as the book prints them: each provider's median per shape, and two configs side by side.

    from fa2.interleaved import medians, side_by_side
    medians("results/gluon_split_pairs_ab.csv")     # {(B, H, N, D): {provider: median ms}}
    side_by_side("nopp", [("persistent_split_half", "r4_n128b2_pingpong_persistent_split_half",
                           "r4_n128b2_persistent_split_half")], "without ping-pong")

side_by_side reads the two runs results/gluon_<tag>_ab_1.csv and _2.csv that the check-then-time scripts of gpu/
write (gpu/candidates.sh), so that a chapter shows both runs of every comparison it quotes.
"""

import csv
import statistics
from pathlib import Path

from fa2.bench import truncated


def medians(path, causal=True):
    """{(B, H, N, D): {provider: median ms}} of one run's CSV, its causal rows (or with causal=False those timed
    without the mask); {} with a note when the file is not there (a copy of the book without its results/
    folder)."""
    path = Path(path)
    if not path.exists():
        print(f"{path.name} is not here: it is in the repository's book/results/ folder")
        return {}
    timed = {}
    for row in csv.DictReader(open(path, newline="")):
        if not row["ms"] or row["causal"] != str(bool(causal)):
            continue
        shape = tuple(int(row[key]) for key in ("B", "H", "N", "D"))
        timed.setdefault(shape, {}).setdefault(row["provider"], []).append(float(row["ms"]))
    return {shape: {p: statistics.median(ms) for p, ms in found.items()} for shape, found in timed.items()}


def side_by_side(tag, pairs, change, also=(), results="results", causal=True, runs=2):
    """The runs results/gluon_<tag>_ab_{1,2}.csv (`runs` of them: _1 to _<runs>), their causal shapes (or those
    timed without the mask): per shape, cuDNN's median and the medians of the Gluon configs named in `also`; then
    for each (label, before, after) pair of config names both medians, before / after and cuDNN / after (ratios
    truncated, never rounded up)."""
    width = max(len(label) for label, _, _ in pairs)
    for run in (f"gluon_{tag}_ab_{i}.csv" for i in range(1, runs + 1)):
        print(run)
        for (B, H, N, D), t in sorted(medians(Path(results) / run, causal).items()):
            print(f"  ({B}, {H}, {N}, {D}) {'causal' if causal else 'non-causal'}   cuDNN {t['sdpa_cudnn']:.4f} ms"
                  + "".join(f", {name} {t[f'gluon_{name}']:.4f} ms" for name in also))
            for label, before, after in pairs:
                b, a = t[f"gluon_{before}"], t[f"gluon_{after}"]
                print(f"    {label:{width}s} {b:.4f} ms, {change} {a:.4f} ms: {truncated(b / a)}x, "
                      f"{truncated(t['sdpa_cudnn'] / a)}x cuDNN")
