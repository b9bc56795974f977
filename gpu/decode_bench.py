"""The decode benchmark on the GPU machine: check fa2.decode on the family, time it, its candidates and peers.

    python3 gpu/decode_bench.py [OUT_DIR] [--quick] [--no-tune]

OUT_DIR defaults to $OUT, else book/results. Writes OUT_DIR/decode.csv (one row per shape and provider,
with the command that made it) and OUT_DIR/decode.png (GB/s vs cache length, copy ceiling drawn) when
matplotlib is importable; prints the summary table, the issue's goals (MET/MISS) and the tuning table.
Exits 1 when an fa2 output (fa2.decode or a candidate launch) failed its check or fa2.decode raised.
What is measured, and how: `fa2/bench_decode.py`.
"""
import argparse
import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repository's fa2, not an installed one

from fa2.bench_decode import run_sweep  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=Path(os.environ.get("OUT", "book/results")))
    parser.add_argument("--quick", action="store_true", help="B in {1, 32}, N in {1k, 8k, 128k}, fewer candidates")
    parser.add_argument("--no-tune", action="store_true", help="skip the fa2_tune rows (split counts, configs)")
    args = parser.parse_args(argv)
    rows = run_sweep(args.out, quick=args.quick, tune=not args.no_tune,
                     command="python3 gpu/decode_bench.py " + shlex.join(argv))
    bad = [r for r in rows if (r["provider"] == "fa2" and r["check"] == "error") or
           (r["provider"].startswith("fa2") and r["check"] == "fail")]   # a candidate may fail to compile
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
