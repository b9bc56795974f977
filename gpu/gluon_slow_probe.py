"""Why did fa2.attention (Gluon dispatch) take chapter 6's time plus the Gluon kernel's at two reference shapes?

    python gpu/gluon_slow_probe.py      # prints, per shape: kernels one call launches, and times three ways
"""
import torch
import triton.testing
from torch.profiler import ProfilerActivity, profile

import fa2
from fa2.gluon.attention_hopper import attention_gluon
from fa2.plan import chapter6_plan, make_plan
from fa2.testing import time_ms

SHAPES = [(1, 32, 2048, 128, False, torch.bfloat16), (8, 16, 2048, 64, True, torch.float16),
          (32, 32, 512, 128, True, torch.bfloat16), (1, 32, 8192, 128, True, torch.bfloat16)]

for B, H, N, D, causal, dtype in SHAPES:
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=dtype) for _ in range(3))
    scale = D ** -0.5
    plan = make_plan(q, k, v, causal, scale)
    ch6 = chapter6_plan(q, k, v, causal, scale)
    fns = {"fa2.attention": lambda: fa2.attention(q, k, v, causal=causal), "plan": lambda: plan(q, k, v),
           "chapter6": lambda: ch6(q, k, v),
           "gluon direct": lambda: attention_gluon(q, k, v, causal, scale, rung=plan.rung, config=plan.config)
           if hasattr(plan, "rung") else None}
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fa2.attention(q, k, v, causal=causal)
        torch.cuda.synchronize()
    kernels = [e.name[:60] for e in prof.events() if e.device_type.name == "CUDA"]
    print(f"\n{(B, H, N, D, causal, dtype)} plan {type(plan).__name__} {getattr(plan, 'rung', '')} "
          f"{getattr(plan, 'config', '')}\n  one fa2.attention call launches: {kernels}")
    for name, fn in fns.items():
        t = [time_ms(fn) for _ in range(3)]
        g = triton.testing.do_bench_cudagraph(fn, rep=50)
        print(f"  {name:14s} do_bench {' '.join(f'{x:.4f}' for x in t)} ms   cuda graph {g:.4f} ms")
