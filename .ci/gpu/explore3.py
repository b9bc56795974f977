"""GPU exploration 3 (device tool): software-pipelined softmax (rotated loop) and BLOCK_M=256, host descriptors."""
import csv, os, sys, time
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton
import fa2
from fast_rotated import attention_fast
from fa2.testing import attention_tflops
from torch.nn.attention import sdpa_kernel, SDPBackend
F = torch.nn.functional
OUT = os.environ.get("OUT", "/tmp"); t0 = time.time(); rows = []
def bench(fn): return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median")
variants = [("base", dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2), False),
            ("base64", dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2), False),
            ("base64x64", dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2), False)]
for bm, bn, w, s in [(128, 64, 4, 2), (128, 64, 4, 3), (128, 64, 8, 2), (128, 32, 4, 2), (128, 128, 8, 2), (64, 64, 4, 2), (64, 128, 4, 2)]:
    variants.append(("rotate", dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s), True))
for bm, bn, w, s in [(256, 64, 8, 2), (256, 32, 8, 2), (256, 64, 8, 3)]:
    variants.append(("bm256", dict(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=s), False))
for (B, H, N, D, causal) in [(8, 32, 2048, 128, True), (8, 32, 2048, 128, False), (8, 32, 2048, 64, True), (32, 16, 512, 64, False), (32, 32, 512, 128, True)]:
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        flash = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    line = []
    for name, cfg, rot in variants:
        run = lambda: attention_fast(q, k, v, causal, config=cfg, host_desc=True, rotate=rot)
        try:
            o = run()[0]; torch.cuda.synchronize()
            err = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
            status = "ok" if torch.isfinite(o).all() and err < 1e-2 else f"bad {err:.2e}"
            ms = bench(run) if status == "ok" else float("nan")
        except Exception as e:
            status, ms = "error " + type(e).__name__ + " " + str(e)[:60].replace("\n", " "), float("nan")
        rows.append(dict(B=B, H=H, N=N, D=D, causal=int(causal), variant=name, cfg=str(cfg), ms=ms, x_flash=flash / ms, check=status))
        line.append(f"{name}{cfg['BLOCK_M']}x{cfg['BLOCK_N']}w{cfg['num_warps']}s{cfg['num_stages']}={flash/ms:.3f}" if status == "ok" else f"{name}{cfg['BLOCK_M']}x{cfg['BLOCK_N']}w{cfg['num_warps']}s{cfg['num_stages']}:{status[:30]}")
    print(f"[{time.time()-t0:4.0f}s] {B},{H},{N},{D},c={int(causal)} flash {flash:.3f}ms | " + "  ".join(line), flush=True)
    with open(f"{OUT}/explore3.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0])); w.writeheader(); w.writerows(rows)
