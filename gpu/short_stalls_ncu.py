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
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_paged_ncu as base  # noqa: E402

METRICS = ["gpu__time_duration.sum", "smsp__inst_executed.sum",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "smsp__issue_active.avg.pct_of_peak_sustained_active"]


def profile_named(out, names, shape, tag, stem, log_stem, **ncu):
    """gpu/short_causal_ncu.py's named target (NAMES, at SHAPE 'B,H,N,D' or its default) under ncu
    (decode_paged_ncu.profile with the keyword arguments `ncu`): OUT/stem[_TAG].csv and OUT/log_stem[_TAG].log."""
    os.environ["SHORT_CAUSAL_CONFIGS"] = names
    if shape:
        os.environ["SHORT_CAUSAL_SHAPE"] = shape
    suffix = f"_{tag}" if tag else ""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "short_causal_ncu.py")
    base.profile(out, f"{stem}{suffix}.csv", script, log_name=f"{log_stem}{suffix}.log", **ncu)


def main(out, names, shape=None, tag=""):
    profile_named(out, names, shape, tag, "short_stalls_ncu", "ncu", metrics=METRICS,
                  options=["--section", "WarpStateStats", "--section", "InstructionStats"])


if __name__ == "__main__":
    main(*sys.argv[1:5])
