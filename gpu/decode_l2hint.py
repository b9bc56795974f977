"""An L2 prefetch-size hint on fa2.decode's K and V copies, beside cuDNN where it ties or leads (an H200).

    python gpu/decode_l2hint.py OUT [ROUNDS]     # OUT/decode_l2hint.csv, a row per (shape, round, variant)

Triton 3.6 emits the split-KV kernel's K and V loads as `cp.async.cg.shared.global [dst], [src], 16, n` (SASS
LDGSTS.E.BYPASS.128); CUTLASS's cache-global copies add `.L2::128B`, a hint that the L2 fetch whole 128-byte (or
with `.L2::256B`, 256-byte) blocks from HBM. Triton's language has no way to ask for it, so this script asks
ptxas: a stage hook (triton.knobs.runtime.add_stages_inspection_hook) rewrites those instructions in the PTX of
copies of chapter 9's module (fa2.testing.mutant: each copy's source differs by a comment, so each compiles
anew, into a fresh TRITON_CACHE_DIR) compiled with each hint. Variants: "copy" (no hint: the copy itself),
"L2::64B", "L2::128B", "L2::256B". Every variant's output must equal the shipped launch's bit for bit (a hint
cannot change a value); then cuDNN, the shipped launch and the variants are timed in ROUNDS interleaved rounds
(CUDA-graph replays, fa2.bench_decode.gpu_time_us), the order rotated.
"""

import os
import tempfile

os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="l2hint-")      # before Triton reads it

import csv  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
from torch.nn.attention import SDPBackend  # noqa: E402
from triton import knobs  # noqa: E402

import fa2.decoding as decoding  # noqa: E402
from fa2 import bench_decode as bd  # noqa: E402
from fa2.bench import interleaved_rounds  # noqa: E402
from fa2.chapters import flash_decoding  # noqa: E402
from fa2.testing import mutant  # noqa: E402

SHAPES = [(1, 131072), (8, 4096), (8, 32768), (8, 131072), (32, 4096), (32, 8192), (32, 32768), (32, 131072),
          (1, 8192), (8, 8192), (32, 1024)]
HINTS = ["", "64B", "128B", "256B"]
HINT = {"now": ""}                     # the hint the PTX stage applies to kernels compiled now
PATCHED = {}


def hook(backend, stages, options, language, capability):
    make_ptx = stages["ptx"]

    def ptx(src, metadata):
        text = make_ptx(src, metadata)
        if metadata.get("name") == "_split_kv_kernel" and HINT["now"]:
            text, n = re.subn(r"cp\.async\.cg\.shared\.global \[", f"cp.async.cg.shared.global.L2::{HINT['now']} [",
                              text)
            PATCHED[HINT["now"]] = PATCHED.get(HINT["now"], 0) + n
        return text
    stages["ptx"] = ptx


def module_for(hint):
    """A copy of chapter 9's module whose split-KV kernel compiles anew (its source differs by a comment)."""
    return mutant(flash_decoding, {"pid_bkv = tl.program_id(0)": f"pid_bkv = tl.program_id(0)  # L2 hint {hint!r}"})


def plan_fn(module, x):
    """fa2.decode's plan for x (shipped split count and config) launching `module`'s kernels."""
    shipped = decoding.decode_launch
    decoding.decode_launch = module.decode_launch
    try:
        plan = decoding.DecodePlan(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table,
                                   x.q.shape[-1] ** -0.5, None, -1, 0.0)
    finally:
        decoding.decode_launch = shipped
    return lambda x: plan(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table)[0]


def main(out, rounds=5):
    knobs.runtime.add_stages_inspection_hook = hook
    modules = {hint: module_for(hint) for hint in HINTS}
    path = Path(out) / "decode_l2hint.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["B", "N", "variant", "round", "gpu_us", "identical", "device", "torch", "command"])
        for B, N in SHAPES:
            shape = bd.DecodeShape(B, N)
            sets = bd.input_sets(shape, torch.Generator("cuda").manual_seed(0))
            x = sets[0]
            calls = {"cudnn": bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, sets), "shipped": bd.build_fa2(shape, sets)}
            expected = calls["shipped"](x).clone()
            identical = {"cudnn": "", "shipped": "True"}
            for hint, module in modules.items():
                HINT["now"] = hint                     # compiled (if new) on this first call
                fn = plan_fn(module, x)
                identical[hint or "copy"] = str(bool(torch.equal(fn(x), expected)))
                calls[hint or "copy"] = fn
            HINT["now"] = ""
            names = list(calls)
            times, errors = interleaved_rounds([lambda fn=calls[n]: bd.gpu_time_us(fn, sets)[0] for n in names],
                                               rounds)
            if any(errors):
                raise RuntimeError(next(e for e in errors if e))
            for name, us in zip(names, times):
                for r, t in enumerate(us):
                    writer.writerow([B, N, name, r, f"{t:.4g}", identical[name], bd.device_name(), torch.__version__,
                                     f"python gpu/decode_l2hint.py OUT {rounds}"])
            f.flush()
            med = {n: statistics.median(t) for n, t in zip(names, times)}
            print(f"B={B} N={N}: " + "  ".join(f"{n} {med[n]:.4g}" for n in names)
                  + f"  | cuDNN/shipped {med['cudnn'] / med['shipped']:.4f} "
                  + " ".join(f"{n}/shipped {med[n] / med['shipped']:.4f}" for n in names[2:])
                  + f"  identical {[identical[n] for n in names[2:]]}", flush=True)
    print("patched instructions per hint:", PATCHED)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5))
