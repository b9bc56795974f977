"""Why a paged cache costs fa2.decode about a microsecond at B=1 with 1k keys: its split-KV and combine kernels
under Nsight Compute beside the contiguous cache's (an H200).

    python gpu/decode_paged_ncu.py OUT        # runs itself under ncu: OUT/decode_paged_ncu.csv, OUT/ncu.log

One decode call per layout (contiguous, paged 16, paged 256; bf16, Hq 32, Hkv 8, D 128, 1024 keys), each bracketed
by cudaProfilerStart/Stop after warm-up calls, L2 flushed before each kernel (ncu's default cache control), clocks
not locked (--clock-control none). The CSV is ncu's raw page (--page raw --csv) for every kernel profiled.
"""

import os
import subprocess
import sys

import torch

LAYOUTS = (0, 16, 256)
METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.max", "smsp__inst_executed.sum",
           "dram__bytes_read.sum", "lts__t_sector_hit_rate.pct", "launch__grid_size", "launch__registers_per_thread",
           "launch__shared_mem_per_block_dynamic", "smsp__warps_issue_stalled_long_scoreboard_per_warp_active.pct",
           "smsp__warps_issue_stalled_barrier_per_warp_active.pct",
           "smsp__warps_issue_stalled_wait_per_warp_active.pct",
           "smsp__average_warp_latency_per_inst_issued.ratio", "sm__warps_active.avg.pct_of_peak_sustained_active"]


def target():
    from fa2 import bench_decode as bd
    for page in LAYOUTS:
        shape = bd.DecodeShape(1, 1024, page)
        x = bd.make_inputs(shape, torch.Generator("cuda").manual_seed(0))
        profiled_call(bd.build_fa2(shape, [x]), x, warmup=20)


def profiled_call(fn, x, warmup):
    """fn(x) `warmup` times, then once more between cudaProfilerStart and Stop: the call ncu profiles."""
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    fn(x)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def profile(out, csv_name, script, metrics=(), options=(), page="raw", log_name="ncu.log"):
    """Run `script --target` under ncu with `metrics` and further ncu `options` (sections, a kernel filter); write
    ncu's `page` (raw: a row per kernel; source: a row per instruction) to OUT/csv_name, its log to
    OUT/log_name, and print each kernel's metrics (raw page) or the number of rows."""
    from fa2.profile import find_ncu
    ncu = find_ncu()
    if ncu is None:
        sys.exit(f"{os.path.basename(script)}: no ncu (Nsight Compute) on this machine")
    command = [ncu, "--clock-control", "none", "--profile-from-start", "off", *options]
    if metrics:
        command += ["--metrics", ",".join(metrics)]
    command += ["--page", page, "--csv", sys.executable, script, "--target"]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    open(os.path.join(out, log_name), "w").write(done.stderr + "\n" + "\n".join(
        line for line in done.stdout.splitlines() if not line.startswith('"')))
    rows = [line for line in done.stdout.splitlines() if line.startswith('"')]
    open(os.path.join(out, csv_name), "w").write("\n".join(rows) + "\n")
    if page != "raw":
        print(f"{len(rows)} rows; ncu rc {done.returncode}")
        return
    import csv
    table = list(csv.DictReader(rows))
    for r in table[1:]:                      # the second row holds units
        print(r.get("Kernel Name", "")[:30], {m: r.get(m) for m in metrics})


if __name__ == "__main__":
    if sys.argv[1] == "--target":
        target()
    else:
        profile(sys.argv[1], "decode_paged_ncu.csv", __file__, METRICS)
