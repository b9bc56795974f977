"""Where in the code the persistent Gluon kernel's warps stall at a causal shape: Nsight Compute's per-instruction
(SASS) stall samples for one named Gluon candidate (book/appendix_short_items.ipynb; an H200).

    python gpu/short_source_ncu.py OUT NAME [B,H,N,D [TAG]]
        # runs itself under ncu: OUT/short_source_ncu[_TAG].csv (the source page, SASS), OUT/ncu_source[_TAG].log

One call after warm-up calls (gpu/short_causal_ncu.py's target_named: cudaProfilerStart/Stop around it, L2
flushed before the kernel, clocks not locked), only the Gluon kernel profiled (-k _attention_fwd_hopper), with the
SourceCounters section: every SASS instruction's address, source, executed count and warp-stall samples by reason.
"""

import os
import subprocess
import sys


def main(out, name, shape=None, tag=""):
    from fa2.profile import find_ncu
    ncu = find_ncu()
    if ncu is None:
        sys.exit("short_source_ncu.py: no ncu (Nsight Compute) on this machine")
    os.environ["SHORT_CAUSAL_CONFIGS"] = name
    if shape:
        os.environ["SHORT_CAUSAL_SHAPE"] = shape
    suffix = f"_{tag}" if tag else ""
    here = os.path.dirname(os.path.abspath(__file__))
    command = [ncu, "--clock-control", "none", "--profile-from-start", "off", "-k", "regex:_attention_fwd_hopper",
               "--section", "SourceCounters", "--section", "WarpStateStats", "--page", "source", "--print-source",
               "sass", "--csv", sys.executable, os.path.join(here, "short_causal_ncu.py"), "--target"]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    open(os.path.join(out, f"ncu_source{suffix}.log"), "w").write(done.stderr + "\n" + "\n".join(
        line for line in done.stdout.splitlines() if not line.startswith('"')))
    rows = [line for line in done.stdout.splitlines() if line.startswith('"')]
    open(os.path.join(out, f"short_source_ncu{suffix}.csv"), "w").write("\n".join(rows) + "\n")
    print(f"{len(rows)} source rows; ncu rc {done.returncode}")


if __name__ == "__main__":
    main(*sys.argv[1:5])
