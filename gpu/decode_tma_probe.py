"""Do TMA loads (device-side tensor descriptors) stream a contiguous KV cache faster than chapter 9's pointer
loads? fa2.decode's kernel with its K and V loads swapped for descriptor loads (a mutant of chapter 9's module;
contiguous caches only, D = HEAD_DIM), beside the shipped launch and SDPA's cuDNN backend (an H200).

    python gpu/decode_tma_probe.py OUT [SECONDS]     # OUT/decode_tma_probe.csv

Rows past each row's length are zero-filled by the descriptor's shape (the prefix), so V needs no mask. Every
variant's output is compared with the shipped launch's (rel_err <= 1e-2, else "fail").
"""

import csv
import sys
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, str(Path(__file__).resolve().parent))
import decode_explore as ex                        # noqa: E402  (plan_fn, environment, shape_inputs)
from fa2 import bench_decode as bd                 # noqa: E402
from fa2._triton_compat import ensure_tma_allocator   # noqa: E402
from fa2.chapters import flash_decoding            # noqa: E402
from fa2.testing import mutant, rel_err            # noqa: E402

TMA = mutant(flash_decoding, {
    "    offs_n = tl.arange(0, BLOCK_N)\n    for kv_tile_start":
    "    offs_n = tl.arange(0, BLOCK_N)\n"
    "    k_desc = tl.make_tensor_descriptor(K + off_b * stride_k_outer + off_kv_h * stride_kh, shape=[seqlen, HEAD_DIM],\n"
    "                                       strides=[stride_k_row, 1], block_shape=[BLOCK_N, HEAD_DIM])\n"
    "    v_desc = tl.make_tensor_descriptor(V + off_b * stride_v_outer + off_kv_h * stride_vh, shape=[seqlen, HEAD_DIM],\n"
    "                                       strides=[stride_v_row, 1], block_shape=[BLOCK_N, HEAD_DIM])\n"
    "    for kv_tile_start",
    "        k = tl.load(k_head + k_rows[:, None], mask=load_mask, other=0.0)":
    "        k = k_desc.load([kv_tile_start, 0])",
    "        v = tl.load(v_head + v_rows[:, None], mask=load_mask, other=0.0)":
    "        v = v_desc.load([kv_tile_start, 0])"})
SHAPES = [(32, 131072), (32, 8192), (8, 131072), (8, 32768), (8, 4096), (1, 131072), (1, 8192)]
CONFIGS = [("tma", 64, 4, 3), ("tma", 128, 4, 2), ("tma", 128, 4, 3), ("tma", 64, 4, 4), ("tma", 128, 8, 3),
           ("pointer", 128, 4, 2)]
COLUMNS = ["B", "N", "variant", "block_n", "num_warps", "num_stages", "num_splits", "gpu_us", "vs_shipped",
           "vs_cudnn", "rel_err", "check", "device", "torch", "triton", "command"]


def main(out, seconds=240.0):
    out = Path(out)
    ensure_tma_allocator()
    with open(out / "decode_tma_probe.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS)
        writer.writeheader()
        context = ex.environment()
        for shape, sets in ex.shape_inputs([bd.DecodeShape(B, N) for B, N in SHAPES], seconds):
            x = sets[0]
            shipped_fn = bd.build_fa2(shape, sets)
            expected = shipped_fn(x).float()
            shipped = bd.gpu_time_us(shipped_fn, sets)[0]
            cudnn = bd.gpu_time_us(bd.build_sdpa(SDPBackend.CUDNN_ATTENTION)(shape, sets), sets)[0]
            splits = ex.decoding.choose_num_splits(x.q, x.k_cache, x.block_table)

            def row(variant, us, **extra):
                writer.writerow(dict(B=shape.B, N=shape.N, variant=variant, gpu_us=f"{us:.4g}",
                                     vs_shipped=f"{us / shipped:.4f}", vs_cudnn=f"{us / cudnn:.4f}",
                                     **extra, **context))
                f.flush()
            row("shipped", shipped, num_splits=splits)
            row("cudnn", cudnn)
            line = f"{shape.name():24s} shipped {shipped:8.2f} cudnn {cudnn:8.2f}"
            for kind, bn, w, s in CONFIGS:
                module = TMA if kind == "tma" else flash_decoding
                cfg = dict(block_n=bn, num_warps=w, num_stages=s)
                try:
                    fn = ex.plan_fn(module, x, cfg, None)
                    err = rel_err(fn(x).float(), expected)
                    us = bd.gpu_time_us(fn, sets)[0]
                except Exception as error:
                    print(f"  {kind} {cfg}: {type(error).__name__}: {str(error)[:200]}", flush=True)
                    continue
                row(kind, us, block_n=bn, num_warps=w, num_stages=s, num_splits=splits, rel_err=f"{err:.1e}",
                    check="ok" if err <= 1e-2 else "fail")
                line += f" | {kind} {bn}/{w}/{s} {us:8.2f}{'' if err <= 1e-2 else ' FAIL'}"
            print(line, flush=True)
            del sets, x, expected
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main(sys.argv[1], *map(float, sys.argv[2:3]))
