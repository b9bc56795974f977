"""Where in the code the persistent Gluon kernel's warps stall at a causal shape: Nsight Compute's per-instruction
(SASS) stall samples for one named Gluon candidate (book/appendix_short_items.ipynb; an H200).

    python gpu/short_source_ncu.py OUT NAME [B,H,N,D [TAG]]
        # runs itself under ncu: OUT/short_source_ncu[_TAG].csv (the source page, SASS), OUT/ncu_source[_TAG].log

One call after warm-up calls (gpu/short_causal_ncu.py's target_named: cudaProfilerStart/Stop around it, L2
flushed before the kernel, clocks not locked), only the Gluon kernel profiled (-k _attention_fwd_hopper), with the
SourceCounters section: every SASS instruction's address, source, executed count and warp-stall samples by reason.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from short_stalls_ncu import profile_named  # noqa: E402


def main(out, name, shape=None, tag=""):
    profile_named(out, name, shape, tag, "short_source_ncu", "ncu_source", page="source",
                  options=["-k", "regex:_attention_fwd_hopper", "--section", "SourceCounters", "--section",
                           "WarpStateStats", "--print-source", "sass"])


if __name__ == "__main__":
    main(*sys.argv[1:5])
