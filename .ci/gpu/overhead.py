"""Where a small call's time goes (device tool): per-call times of each layer of fa2.attention at tiny shapes."""
import time, torch, triton
import fa2
from fa2 import api
from fa2.fast import attention_fast
from torch.nn.attention import SDPBackend, sdpa_kernel
F = torch.nn.functional

def per_call_us(fn, n=2000):
    for _ in range(50): fn()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t0) / n * 1e6

for (B, H, N, D) in [(1, 16, 512, 64), (8, 16, 512, 64)]:
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    cfg = dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=2)
    rows = {
        "fa2.attention (eager path)": lambda: fa2.attention(q, k, v, causal=True),
        "custom op": lambda: api._attention_op(q, k, v, True, 0.125),
        "api._forward": lambda: api._forward(q, k, v, True, 0.125),
        "attention_fast host desc": lambda: attention_fast(q, k, v, True, 0.125, config=cfg, host_desc=True),
        "attention_fast device desc": lambda: attention_fast(q, k, v, True, 0.125, config=cfg),
        "sdpa flash": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    for name, fn in rows.items():
        print(f"{B},{H},{N},{D} {name:30s} wall {per_call_us(fn):7.1f} us/call   do_bench {triton.testing.do_bench(fn, return_mode='median')*1e3:7.1f} us", flush=True)
