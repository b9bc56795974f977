"""Tune and ship configs (needs a CUDA GPU): `python -m fa2.tune` writes fa2/configs/<GPU name>.json there.

For every tuning key of the reference sweep (head dim, dtype, mask, length bucket) it checks each pruned
candidate against the chapter-5 kernel on the same inputs, times the ones that pass, and keeps the fastest.
The JSON records every candidate's time and error beside the choice, and the command that made it.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from fa2 import runtime
from fa2.chapters.autotune import (FAST_CANDIDATES, GENERIC_CANDIDATES, SHIPPED_DIR, device_file_name, prune, tune,
                          tuning_key)
from fa2.chapters.fast import attention_fast
from fa2.chapters.forward import attention_forward

# (B, H, N) per length; D = 128 uses H = 32, D = 64 uses H = 16 (the reference sweep's shapes)
TUNING_SHAPES = {512: 32, 2048: 8, 8192: 1, 16384: 1}
EXTRA_HEAD_DIMS = (16, 32, 256)   # tuned at N = 2048 only, so first calls never autotune on this GPU


def tuning_cases(head_dims=(64, 128)):
    """(B, H, N, D) of every key: the reference sweep's lengths, plus one length for the other head dims."""
    cases = [(b, 32 if d == 128 else 16, n, d) for d in head_dims for n, b in TUNING_SHAPES.items()]
    return cases + [(8, 16, 2048, d) for d in EXTRA_HEAD_DIMS]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m fa2.tune", description=__doc__.splitlines()[0],
                                     epilog="Needs a CUDA GPU: tuning times kernels on the GPU it will ship for.")
    parser.add_argument("--kernel", choices=["fast", "generic"], default=None,
                        help="default: fast on sm_90+, generic elsewhere")
    parser.add_argument("--out", default=None, help="output JSON (default fa2/configs/<GPU name>.json)")
    args = parser.parse_args(argv)
    if runtime.DEVICE != "cuda":
        print("fa2.tune needs a CUDA GPU: it times candidate configs on the GPU whose table it writes; "
              "this machine runs kernels under the Triton interpreter", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    kernel = args.kernel or ("fast" if torch.cuda.get_device_capability()[0] >= 9 else "generic")
    props = torch.cuda.get_device_properties(0)
    max_smem = getattr(props, "shared_memory_per_block_optin", 99 * 1024)
    table, record = {}, {}
    t0 = time.time()
    for (B, H, N, D) in tuning_cases():
        for dtype in (torch.float16, torch.bfloat16):
            for causal in (False, True):
                q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
                if kernel == "fast":
                    run = lambda cfg: attention_fast(q, k, v, causal, config=cfg, host_desc=True)[0]
                    candidates = prune("fast", FAST_CANDIDATES, D, max_smem)
                else:
                    run = lambda cfg: attention_forward(q, k, v, causal, **cfg)[0]
                    candidates = prune("generic", GENERIC_CANDIDATES, D, max_smem)
                reference = attention_forward(q, k, v, causal)[0]
                key = tuning_key(kernel, q, k, causal)
                best, results = tune(run, candidates, reference)
                table[key] = best
                record[key] = results
                fastest = min(r["ms"] for r in results)
                print(f"[{time.time() - t0:5.0f}s] {key:40s} -> {best}  {fastest:.3f} ms  "
                      f"({sum(r['ok'] for r in results)}/{len(results)} passed)", flush=True)
                del q, k, v, reference
    out = Path(args.out) if args.out else SHIPPED_DIR / device_file_name(name)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        json.dump({"device": name, "kernel": kernel, "torch": torch.__version__,
                   "triton": __import__("triton").__version__, "command": "python -m fa2.tune " + " ".join(argv or sys.argv[1:]),
                   "configs": table, "candidates": record}, f, indent=1, sort_keys=True)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
