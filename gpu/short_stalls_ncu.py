"""Where the warps of the persistent Gluon kernel wait at (32, 32, 512, 128) bf16 causal: Nsight Compute's warp-state
section (every stall reason, with this ncu's own metric names) for named Gluon candidates and cuDNN
(book/appendix_short_items.ipynb; an H200).

    python gpu/short_stalls_ncu.py OUT NAME,NAME,... [B,H,N,D [TAG]]
        # runs itself under ncu: OUT/short_stalls_ncu[_TAG].csv, OUT/ncu[_TAG].log; default shape 32,32,512,128

One call each after warm-up calls (gpu/short_causal_ncu.py's target_named: cudaProfilerStart/Stop around it, L2
flushed before each kernel, clocks not locked). The CSV is ncu's raw page (--page raw --csv): the WarpStateStats
and InstructionStats sections' metrics plus short_causal_ncu.METRICS' time, instruction and tensor-pipe ones.
"""

import os
import subprocess
import sys

import short_causal_ncu

METRICS = ["gpu__time_duration.sum", "smsp__inst_executed.sum",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "smsp__issue_active.avg.pct_of_peak_sustained_active"]


def main(out, names, shape=None, tag=""):
    from fa2.profile import find_ncu
    ncu = find_ncu()
    if ncu is None:
        sys.exit("short_stalls_ncu.py: no ncu (Nsight Compute) on this machine")
    os.environ["SHORT_CAUSAL_CONFIGS"] = names
    if shape:
        os.environ["SHORT_CAUSAL_SHAPE"] = shape
    suffix = f"_{tag}" if tag else ""
    here = os.path.dirname(os.path.abspath(__file__))
    command = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--section", "WarpStateStats",
               "--section", "InstructionStats", "--metrics", ",".join(METRICS), "--page", "raw", "--csv",
               sys.executable, os.path.join(here, "short_causal_ncu.py"), "--target"]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    open(os.path.join(out, f"ncu{suffix}.log"), "w").write(done.stderr + "\n" + "\n".join(
        line for line in done.stdout.splitlines() if not line.startswith('"')))
    rows = [line for line in done.stdout.splitlines() if line.startswith('"')]
    open(os.path.join(out, f"short_stalls_ncu{suffix}.csv"), "w").write("\n".join(rows) + "\n")
    print(f"{len(rows) - 2} kernels profiled; ncu rc {done.returncode}")


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main(*sys.argv[1:5])
