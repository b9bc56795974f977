"""Where cuDNN's ~10 % at (32, 32, 512, 128) bf16 causal comes from: the kernels under Nsight Compute, causal and
not (book/results/short_causal.md; an H200).

    python gpu/short_causal_ncu.py OUT        # runs itself under ncu: OUT/short_causal_ncu.csv, OUT/ncu.log
    python gpu/short_causal_ncu.py OUT NAME,NAME,...   # causal only: these Gluon candidates (fa2/gluon/candidates.py)
                                                       # and cuDNN -> OUT/short_causal_configs_ncu.csv

Per mask: fa2.attention (the Gluon table's choice, rung 1 at the causal shape), the Gluon rung-1 config with 64-row
tiles, chapter 6's kernel, and SDPA's cuDNN backend; one call each after warm-up calls (cudaProfilerStart/Stop
around it, L2 flushed before each kernel, clocks not locked), gpu/decode_paged_ncu.py's way.
"""

import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

import decode_paged_ncu as base

SHAPE = (32, 32, 512, 128)
METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.max", "smsp__inst_executed.sum",
           "dram__bytes_read.sum", "dram__bytes_write.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "lts__t_sector_hit_rate.pct", "launch__grid_size", "launch__block_size", "launch__registers_per_thread",
           "launch__shared_mem_per_block_dynamic", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "sm__maximum_warps_per_active_cycle_pct",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "smsp__warps_issue_stalled_long_scoreboard_per_warp_active.pct",
           "smsp__warps_issue_stalled_barrier_per_warp_active.pct",
           "smsp__warps_issue_stalled_wait_per_warp_active.pct",
           "smsp__warps_issue_stalled_math_pipe_throttle_per_warp_active.pct",
           "smsp__warps_issue_stalled_membar_per_warp_active.pct",
           "smsp__warps_issue_stalled_short_scoreboard_per_warp_active.pct",
           "smsp__warps_issue_stalled_sleeping_per_warp_active.pct",
           "smsp__issue_active.avg.pct_of_peak_sustained_active"]


def target_named(names):
    """Causal only: each named Gluon candidate, then cuDNN, at SHAPE or the environment's SHORT_CAUSAL_SHAPE
    ('B,H,N,D'; gpu/short_stalls_ncu.py)."""
    import os

    from fa2.gluon.candidates import CONFIGS
    from fa2.plan import GluonPlan
    from fa2.validate import softmax_scale

    shape = os.environ.get("SHORT_CAUSAL_SHAPE")
    B, H, N, D = tuple(int(x) for x in shape.split(",")) if shape else SHAPE
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    plans = [GluonPlan(q, k, v, True, softmax_scale(D, None), (CONFIGS[name][0], dict(CONFIGS[name][1])))
             for name in names]

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    for fn in [lambda plan=plan: plan(q, k, v) for plan in plans] + [cudnn]:
        base.profiled_call(lambda x: fn(), None, warmup=10)


def target():
    import fa2
    from fa2.gluon.candidates import CONFIGS
    from fa2.plan import GluonPlan, chapter6_plan
    from fa2.validate import softmax_scale

    B, H, N, D = SHAPE
    q, k, v = (torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for causal in (True, False):
        rung, config = CONFIGS["r1_m64n64b2w4"]
        m64 = GluonPlan(q, k, v, causal, softmax_scale(D, None), (rung, dict(config)))
        ch6 = chapter6_plan(q, k, v, causal, None)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        for fn in (lambda: fa2.attention(q, k, v, causal=causal), lambda: m64(q, k, v), lambda: ch6(q, k, v),
                   cudnn):
            base.profiled_call(lambda x: fn(), None, warmup=10)


if __name__ == "__main__":
    import os
    if sys.argv[1] == "--target":
        names = os.environ.get("SHORT_CAUSAL_CONFIGS")
        target_named(names.split(",")) if names else target()
    elif len(sys.argv) > 2:                      # the named candidates reach the target through the environment
        os.environ["SHORT_CAUSAL_CONFIGS"] = sys.argv[2]
        base.profile(sys.argv[1], "short_causal_configs_ncu.csv", __file__, METRICS)
    else:
        base.profile(sys.argv[1], "short_causal_ncu.csv", __file__, METRICS)
