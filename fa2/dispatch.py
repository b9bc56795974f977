"""Which kernel and which launch config a call gets: the one place both are decided.

Eager calls and `torch.compile`d calls both reach `fa2.plan.plan_for`, which asks this module once per input
signature, so the two paths launch the same kernel with the same config.
"""

import functools

import torch
import triton

from fa2 import runtime
from fa2.chapters.autotune import choose_config, tuned_for_its_waves
from fa2.chapters.fast import attention_fast, tma_compatible
from fa2.chapters.forward import attention_forward
from fa2.validate import capability


def gluon_for(q, k, v, causal, scale):
    """(rung, config) of the Gluon kernel (chapter 12) where this GPU's shipped table lists the call's shape family
    as measured faster than chapter 6's kernel and checked, else None (`fa2.gluon.dispatch`)."""
    from fa2.gluon import dispatch
    return dispatch.choose(q, k, v, causal, scale)


def kernel_for(q, k, v):
    """"fast" (chapter 6, Hopper: TMA, exp2, split loops) where it can run, else "generic" (chapter 5)."""
    if q.device.type == "cuda" and capability(q.device.index)[0] >= 9 and tma_compatible(q, k, v):
        return "fast"
    return "generic"  # the interpreter runs both kernels; tests call the fast one directly


# Fewer programs than this many waves over the SMs: a config tuned for a full grid leaves SMs idle, and a 64-row
# tile that makes more programs wins. Measured on the H200, GPU time only (CUDA graph):
# (1,16,512,64) causal 11.0 -> 7.2 us, (1,32,512,128) causal 14.6 -> 12.0 us, (8,16,512,64) causal 26.3 -> 22.7 us
# (`gpu/overhead.py`, book/results/small_configs.csv). The rule applies only where the table has no config tuned
# for the call's bucket of waves (the tuning key's last part); shapes with more programs keep the table's choice.
SMALL_GRID_WAVES = 4
SMALL_GRID_CONFIGS = {  # head dim -> config (both are candidates the tuner checked and shipped for other keys)
    64: dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=2),
    128: dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3),
}


@functools.lru_cache(maxsize=None)
def sm_count(device_index):
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def fill_the_gpu(cfg, q):
    """The small-grid config when the table's leaves most SMs idle (see SMALL_GRID_WAVES)."""
    B, H, N_Q, D = q.shape
    programs = B * H * triton.cdiv(N_Q, cfg["BLOCK_M"])
    if D in SMALL_GRID_CONFIGS and programs < SMALL_GRID_WAVES * sm_count(q.device.index):
        return dict(cfg, **SMALL_GRID_CONFIGS[D])
    return cfg


def select_config(kernel, q, k, v, causal, scale):
    """The launch config: the shipped/cached table (autotuning once if it has none), then the small-grid rule
    when the table's config was tuned for another bucket of waves.

    v and scale are only used to autotune a key the table lacks (each candidate checked against chapter 5)."""
    if kernel == "fast":
        run = lambda cfg: attention_fast(q, k, v, causal, scale, config=cfg, host_desc=True)[0]
    else:
        run = lambda cfg: attention_forward(q, k, v, causal, scale, **cfg)[0]
    reference = lambda: attention_forward(q, k, v, causal, scale)[0]   # chapter 5, default config
    if runtime.INTERPRET:
        return choose_config(kernel, q, k, causal, run, reference)
    sms = sm_count(q.device.index)
    cfg = choose_config(kernel, q, k, causal, run, reference, sms)
    if kernel == "fast" and not tuned_for_its_waves(kernel, q, k, causal, sms):
        cfg = fill_the_gpu(cfg, q)
    return cfg
