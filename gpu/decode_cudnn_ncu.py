"""Where SDPA's cuDNN backend gains its 1-2 % on fa2.decode at the bandwidth limit: both decodes under Nsight
Compute at B = 32 with 8k keys and B = 8 with 32k keys (contiguous caches; bf16, Hq 32, Hkv 8, D 128; an H200).

    python gpu/decode_cudnn_ncu.py OUT        # runs itself under ncu: OUT/decode_cudnn_ncu.csv, OUT/ncu.log

Launch shapes (grid, block, registers, shared memory), DRAM bytes and throughput, L2 hit rate, occupancy and the
main stall reasons of every kernel each call launches, one call per provider and shape after warm-up calls
(gpu/decode_paged_ncu.py's way: cudaProfilerStart/Stop around the call, clocks not locked).
"""

import sys

import torch
from torch.nn.attention import SDPBackend

import decode_paged_ncu as base

SHAPES = [(32, 8192), (8, 32768)]
METRICS = base.METRICS + ["dram__throughput.avg.pct_of_peak_sustained_elapsed", "launch__block_size",
                          "smsp__warps_issue_stalled_lg_throttle_per_warp_active.pct",
                          "sm__maximum_warps_per_active_cycle_pct",
                          "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "lts__t_sectors_srcunit_tex_op_read.sum"]


def target():
    from fa2 import bench_decode as bd
    for B, N in SHAPES:
        shape = bd.DecodeShape(B, N)
        x = bd.make_inputs(shape, torch.Generator("cuda").manual_seed(0))
        for fn in (bd.build_fa2(shape, [x]), bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, [x])):
            base.profiled_call(fn, x, warmup=10)


if __name__ == "__main__":
    if sys.argv[1] == "--target":
        target()
    else:
        base.profile(sys.argv[1], "decode_cudnn_ncu.csv", __file__, METRICS)
