"""How much one provider's time moves between measurements: the money shot (8, 32, 2048, 128) bf16 causal and
(1, 32, 8192, 128) bf16 causal timed in ROUNDS interleaved rounds (every provider once per round, the order
rotated each round), each time with fa2.testing.time_ms (median of do_bench, 100 ms) on rotating input sets.

    python gpu/money_ab.py OUT [ROUNDS] [NAME,...] [SHAPE,...]   # OUT/money_ab.csv: a row per (shape, round, provider)

SHAPE: BxHxNxD then c (causal) or f (not), e.g. 32x32x512x128c, bf16; a trailing "h" makes it fp16
(8x32x512x128ch); default the two above.

Providers: chapter 6's kernel (fa2_ch6), fa2.attention (the shipped Gluon table's choice), SDPA cuDNN, and the
Gluon candidates r4_n64b3_pingpong and r4_n64b3_pingpong_persistent (or the named ones) through a GluonPlan
(gpu/gluon_check.py).
"""

import csv
import sys
from pathlib import Path

import torch

from fa2 import bench as fb
from fa2.gluon.candidates import CONFIGS
from fa2.testing import time_ms
from gluon_check import gluon_provider

SHAPES = [(8, 32, 2048, 128, True, "bf16"), (1, 32, 8192, 128, True, "bf16")]
GLUON = ("r4_n64b3_pingpong", "r4_n64b3_pingpong_persistent")


def parse_shape(text):
    """(B, H, N, D, causal, dtype) of '32x32x512x128c' (bf16) or '32x32x512x128ch' (fp16)."""
    dtype = "fp16" if text.endswith("h") else "bf16"
    body = text[:-1] if dtype == "fp16" else text
    if not body or body[-1] not in "cf":
        raise SystemExit(f"a shape ends in c (causal) or f (not), then h for fp16, got {text!r}")
    B, H, N, D = (int(x) for x in body[:-1].split("x"))
    return B, H, N, D, body[-1] == "c", dtype


def main(out, rounds=5, gluon=GLUON, shapes=SHAPES):
    known = fb.all_providers()
    providers = [known[n] for n in ("fa2_ch6", "fa2", "sdpa_cudnn")] + [
        gluon_provider(n, *CONFIGS[n], n) for n in gluon]
    path = Path(out) / "money_ab.csv"
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["B", "H", "N", "D", "dtype", "causal", "round", "provider", "ms", "device", "torch",
                         "command"])
        for B, H, N, D, causal, dtype in shapes:
            shape = fb.Shape(B=B, H=H, Hkv=H, N=N, D=D, dtype=dtype, causal=causal)
            torch_dtype = torch.float16 if dtype == "fp16" else torch.bfloat16
            sets = [[torch.randn(B, H, N, D, device="cuda", dtype=torch_dtype) for _ in range(3)]
                    for _ in range(4)]
            fns = []
            for p in providers:
                with p.context():
                    fn = p.build(shape)
                    fn(*sets[0])
                fns.append((p, fn))
            for r in range(rounds):
                order = fns[r % len(fns):] + fns[:r % len(fns)]
                for p, fn in order:
                    with p.context():
                        ms = time_ms(fn, sets)
                    writer.writerow([B, H, N, D, dtype, causal, r, p.name, f"{ms:.5f}",
                                     torch.cuda.get_device_name(), torch.__version__,
                                     " ".join(["python gpu/money_ab.py OUT", str(rounds), *sys.argv[3:5]])])
                    file.flush()
                    print(f"{(B, H, N, D, causal, dtype)} round {r} {p.name:32s} {ms:.4f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5,
                  sys.argv[3].split(",") if len(sys.argv) > 3 else GLUON,
                  [parse_shape(s) for s in sys.argv[4].split(",")] if len(sys.argv) > 4 else SHAPES))
