"""Chapter 7's GPU evidence: what each performance bug costs, how a low-precision softmax state drifts with N,
and what int32 offsets do past 2^31 elements. About 3 minutes on an H200.

    python3 gpu/perf_mutants.py OUT_DIR [perf] [harness] [drift] [int32]      # default: all four parts

Writes, each row with the command that made it (chapter 7 reads them from book/results/):

* OUT_DIR/perf_mutants.csv -- at (8, 32, 2048, 128) bf16 causal: the Hopper kernel with the shipped config and
  each performance mutant (p kept in fp32 before P @ V, too many warps, too many stages, tiles too large for the
  register file) and chapter 5's kernel with and without alignment known to the compiler (the job of
  tl.multiple_of): ms, x the unmutated kernel, TFLOP/s, registers and spills of the compiled kernel, shared
  memory, error against SDPA. Then the harness rows: a first call timed without warm-up, one input set timed
  back to back (L2 warm) and fa2.testing.time_ms (L2 flushed, input sets rotated) at a shape whose K and V fit
  in L2.
* OUT_DIR/drift.csv -- error against fp64 vs N (512...32768) of both kernels with the softmax state in fp32 and
  in the input dtype (bug 1), fp16 and bf16, with SDPA's error on the same rows.
* OUT_DIR/int32.csv -- both kernels with int64 and with int32 offsets on (4, 8192, 1024, 128) bf16 inputs
  (2^32 elements each); each run in its own process, since an illegal address ends the CUDA context.
"""

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from fa2 import runtime  # before triton: the interpreter on a CPU (this script wants a GPU)
from fa2.chapters import bugs, fast, forward
from fa2.chapters.reference import attention_reference
from fa2.dispatch import select_config
from fa2.ladder import TUNED_GENERIC
from fa2.testing import attention_tflops, make_qkv, mutant, rel_err, time_ms

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python3 gpu/perf_mutants.py " + " ".join(sys.argv[1:])
PARTS = ("perf", "harness", "drift", "int32")


def environment():
    return dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                triton=__import__("triton").__version__, command=COMMAND)


def write_csv(path, rows):
    fields = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path} ({len(rows)} rows)", flush=True)


def log(*args):
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def compiled_info(jit_fn):
    """Registers, spills and shared memory of the one kernel a fresh module's JIT function has compiled."""
    try:
        compiled = list(jit_fn.device_caches[torch.cuda.current_device()][0].values())[-1]
        return dict(n_regs=compiled.n_regs, n_spills=compiled.n_spills, shared_bytes=compiled.metadata.shared)
    except Exception as e:  # another Triton keeps its caches elsewhere: the timing still counts
        return dict(n_regs="", n_spills="", shared_bytes="", note=f"no compiled kernel found: {e!r}"[:120])


def run_variant(kernel, module, config, q, k, v, causal):
    """fn(q, k, v) -> o for chapter 5's ("generic") or chapter 6's ("fast") kernel of `module`."""
    if kernel == "fast":
        return lambda q, k, v: module.attention_fast(q, k, v, causal, config=config, host_desc=True)[0]
    return lambda q, k, v: module.attention_forward(q, k, v, causal, **config)[0]


# ----------------------------------------------------------------------------------------------- perf

def perf_rows(B=8, H=32, N=2048, D=128):
    causal, dtype = True, torch.bfloat16
    q, k, v = make_qkv(B, H, H, N, N, D, dtype)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    shipped = {key: val for key, val in select_config("fast", q, k, v, causal, None).items()
               if key in ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages")}
    generic = dict(TUNED_GENERIC)
    variants = [  # (name, kernel, bug or None, config, what)
        ("unmutated", "fast", None, shipped, "shipped config"),
        ("p_fp32_tf32", "fast", "p_fp32_tf32", shipped, "p not cast: fp32 P @ V (tf32 tensor cores)"),
        ("p_fp32_ieee", "fast", "p_fp32_ieee", shipped, "p not cast: fp32 P @ V, ieee (no tensor cores)"),
        ("num_warps_8", "fast", None, dict(shipped, num_warps=8), "num_warps too high"),
        ("num_warps_16", "fast", None, dict(shipped, num_warps=16), "num_warps too high"),
        ("num_stages_5", "fast", None, dict(shipped, num_stages=5), "num_stages too high"),
        ("num_stages_7", "fast", None, dict(shipped, num_stages=7), "num_stages too high (shared memory)"),
        ("tiles_128x128_w4", "fast", None, dict(BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=2),
         "BLOCK_M x BLOCK_N too large for 4 warps' registers"),
        ("tiles_256x64_w4", "fast", None, dict(BLOCK_M=256, BLOCK_N=64, num_warps=4, num_stages=2),
         "BLOCK_M x BLOCK_N too large for 4 warps' registers"),
        ("unmutated", "generic", None, generic, "chapter 5, tuned config"),
        ("alignment_unknown", "generic", "alignment_unknown", generic, "strides not known multiples of 16"),
        ("alignment_hinted", "generic", "alignment_hinted", generic, "... and tl.multiple_of on the offsets"),
    ]
    rows, base_ms = [], {}
    for name, kernel, bug, config, what in variants:
        log("perf", kernel, name, config)
        module = bugs.mutant_module(bug, kernel) if bug else mutant(fast if kernel == "fast" else forward, {})
        fn = run_variant(kernel, module, config, q, k, v, causal)
        row = dict(variant=name, kernel=kernel, what=what, **{key: config.get(key, config.get(key.lower()))
                                                              for key in ("BLOCK_M", "BLOCK_N")},
                   num_warps=config["num_warps"], num_stages=config["num_stages"],
                   B=B, H=H, N=N, D=D, dtype="bf16", causal=causal)
        try:
            out = fn(q, k, v)
            torch.cuda.synchronize()
            row["rel_err"] = f"{rel_err(out, ref):.2e}"
            row.update(compiled_info(module._fa2_fast_kernel if kernel == "fast" else module._fa2_forward_kernel))
            ms = time_ms(fn, inputs=[(q, k, v)])
            base_ms.setdefault(kernel, ms)
            row.update(ms=f"{ms:.4f}", x_unmutated=f"{ms / base_ms[kernel]:.3f}",
                       tflops=f"{attention_tflops(B, H, N, N, D, causal, ms):.1f}")
        except Exception as e:  # a config that cannot launch is a result too
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        rows.append(row)
    return rows


def harness_rows(B=1, H=8, Nq=128, Nk=8192, D=128):
    """Three ways to time one call whose K and V fit in the L2 cache (33.5 MB here; the H200 has 60 MiB)."""
    q, k, v = make_qkv(B, H, H, Nq, Nk, D, torch.bfloat16)
    module = mutant(forward, {})                     # a fresh module: its first call compiles
    fn = lambda q, k, v: module.attention_forward(q, k, v, False, **TUNED_GENERIC)[0]
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn(q, k, v)
    torch.cuda.synchronize()
    first_ms = (time.perf_counter() - start) * 1e3
    for _ in range(10):
        fn(q, k, v)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(100):                             # the same inputs back to back: they stay in L2
        fn(q, k, v)
    end.record()
    torch.cuda.synchronize()
    warm_ms = begin.elapsed_time(end) / 100
    sets = [make_qkv(B, H, H, Nq, Nk, D, torch.bfloat16) for _ in range(4)]
    right_ms = time_ms(fn, inputs=sets)
    shape = dict(B=B, H=H, N_Q=Nq, N_KV=Nk, D=D, dtype="bf16", causal=False, kernel="generic")
    return [dict(variant=name, what=what, ms=f"{ms:.4f}", x_unmutated=f"{ms / right_ms:.3f}", **shape)
            for name, what, ms in [
                ("harness_no_warmup", "first call timed (compiles)", first_ms),
                ("harness_one_input_set", "one input set back to back, L2 warm, CUDA events", warm_ms),
                ("harness_time_ms", "fa2.testing.time_ms: L2 flushed, 4 input sets rotated", right_ms)]]


# ---------------------------------------------------------------------------------------------- drift

def drift_rows(lengths=(512, 1024, 2048, 4096, 8192, 16384, 32768), H=4, D=128, rows_checked=128):
    rows = []
    modules = {(kernel, bug): (bugs.mutant_module(bug, kernel) if bug else mutant(fast if kernel == "fast"
                                                                                   else forward, {}))
               for kernel in bugs.KERNELS for bug in (None, "state_low_precision")}
    for dtype in (torch.float16, torch.bfloat16):
        for N in lengths:
            log("drift", dtype, N)
            q, k, v = make_qkv(1, H, H, N, N, D, dtype)
            tail = q[:, :, -rows_checked:]                     # non-causal: every row sums over all N keys
            ref, ref_lse = attention_reference(tail, k, v, return_lse=True)
            sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v)[:, :, -rows_checked:]
            base = dict(dtype=str(dtype)[6:], N=N, H=H, D=D, rows_checked=rows_checked)
            rows.append(dict(base, kernel="sdpa", state="-", rel_err=f"{rel_err(sdpa, ref):.3e}"))
            for (kernel, bug), module in modules.items():
                config = dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2) if kernel == "fast" \
                    else TUNED_GENERIC
                o, lse = (module.attention_fast(q, k, v, config=config, host_desc=True) if kernel == "fast"
                          else module.attention_forward(q, k, v, **config))
                rows.append(dict(base, kernel=kernel, state="input dtype" if bug else "fp32",
                                 rel_err=f"{rel_err(o[:, :, -rows_checked:], ref):.3e}",
                                 lse_err=f"{(lse[:, :, -rows_checked:].double() - ref_lse).abs().max().item():.3e}"))
            del q, k, v
    return rows


# ---------------------------------------------------------------------------------------------- int32

INT32_SHAPE = (4, 8192, 1024, 128)      # 2^32 elements per tensor; a batch stride of 2^30 fits in int32


def int32_child(kernel, variant, shape=INT32_SHAPE):
    """One run in this process: the output on batches 1 (offset 2^30) and 3 (3 * 2^30 > 2^31)."""
    B, H, N, D = shape
    module = bugs.mutant_module("int32_offsets", kernel) if variant == "int32" else \
        mutant(fast if kernel == "fast" else forward, {})
    q, k, v = (torch.randn(B, H, N, D, device=runtime.DEVICE, dtype=torch.bfloat16) for _ in range(3))
    result = dict(kernel=kernel, offsets=variant, shape="x".join(map(str, shape)))
    try:
        if kernel == "fast":   # device-side descriptors: their base pointers are the offsets that overflow
            o, _ = module.attention_fast(q, k, v, config=dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2),
                                         host_desc=False)
        else:
            o, _ = module.attention_forward(q, k, v, **TUNED_GENERIC)
        torch.cuda.synchronize()
        heads = [0, H // 2, H - 1]
        for b in (1, 3):
            ref = attention_reference(q[b:b + 1, heads], k[b:b + 1, heads], v[b:b + 1, heads])
            result[f"rel_err_batch{b}"] = f"{rel_err(o[b:b + 1, heads], ref):.2e}"
        result["outcome"] = "ok" if all(float(result[f"rel_err_batch{b}"]) < 2e-2 for b in (1, 3)) else "wrong"
    except Exception as e:
        result.update(outcome="error", error=f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
    print("RESULT " + json.dumps(result), flush=True)


def int32_rows():
    rows = []
    for kernel in bugs.KERNELS:
        for variant in ("int64", "int32"):
            log("int32", kernel, variant)
            proc = subprocess.run([sys.executable, __file__, "--int32-child", kernel, variant], cwd=ROOT,
                                  capture_output=True, text=True, timeout=300)
            found = [line[7:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
            row = json.loads(found[-1]) if found else dict(kernel=kernel, offsets=variant, outcome="crash")
            row["returncode"] = proc.returncode
            if proc.returncode and "error" not in row:
                row["error"] = proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else ""
            rows.append(row)
    return rows


def main():
    if sys.argv[1:2] == ["--int32-child"]:
        return int32_child(*sys.argv[2:4])
    if len(sys.argv) < 2 or not torch.cuda.is_available():
        sys.exit(__doc__)
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    parts = [p for p in sys.argv[2:] if p in PARTS] or list(PARTS)
    env = environment()
    start = time.time()
    if "perf" in parts or "harness" in parts:
        rows = (perf_rows() if "perf" in parts else []) + (harness_rows() if "harness" in parts else [])
        write_csv(out / "perf_mutants.csv", [dict(row, **env) for row in rows])
    if "drift" in parts:
        write_csv(out / "drift.csv", [dict(row, **env) for row in drift_rows()])
    if "int32" in parts:
        write_csv(out / "int32.csv", [dict(row, **env) for row in int32_rows()])
    log(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
