"""Append a GPU run's fp64 check and resource rows (gpu/gluon_check.py summary: OUT/gluon_check.csv,
OUT/gluon_resources.csv) to the committed book/results/gluon_check.csv and gluon_resources.csv, with the script
that made them in their `script` column: python gpu/append_checks.py OUT SCRIPT. fa2.gluon.dispatch only lets
configs whose 96 cases passed there into a table."""
import csv
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "book" / "results"


def append(name, src, script):
    with open(RESULTS / name, newline="") as f:
        header = next(csv.reader(f))
    rows = list(csv.DictReader(open(src, newline="")))
    with open(RESULTS / name, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\r\n")
        for row in rows:
            writer.writerow(dict({key: row.get(key, "") for key in header}, script=script))
    print(f"{name}: + {len(rows)} rows")


if __name__ == "__main__":
    out, script = Path(sys.argv[1]), sys.argv[2]
    for name in ("gluon_check.csv", "gluon_resources.csv"):
        append(name, out / name, script)
