"""How much of a short causal work item is its epilogue? An upper bound for overlapping work items.

    python gpu/epilogue_probe.py OUT [ROUNDS]         # OUT/epilogue_probe.csv: a row per (shape, round, provider)
    python gpu/epilogue_probe.py OUT ROUNDS parts     # OUT/epilogue_parts.csv: which part of it, (32, 32, 512, 128)
    python gpu/epilogue_probe.py OUT ROUNDS way_out   # OUT/epilogue_way_out.csv: O's way out, part by part

The persistent Gluon kernel ends each work item with `_write_out` (O normalised, stored to shared memory and sent
out by TMA, the LSE stored). A mutant of fa2/gluon/attention_hopper.py (fa2.testing.mutant) guards that call with a
run-time condition that is never true (`m_start < 0`; `N_Q < 0` for the LSE store, in `_normalised`): the code
stays in the kernel, so its size and layout barely change and nothing upstream is dead code, but no item pays for
its epilogue. Its output is garbage (O is never written), so it is timed, never checked. The table's own config at
each shape is timed as shipped and as the mutant, each through a fa2.plan.GluonPlan as fa2.attention launches it
(the mutant's plan made with the package's attention_hopper swapped for the mutant), beside SDPA's cuDNN backend,
with fa2.testing.time_ms on rotating input sets as gpu/money_ab.py times, in ROUNDS interleaved rounds
(fa2.bench.interleaved_rounds: the order rotated each round). The shipped kernel's output is checked against
cuDNN's first. (8, 32, 512, 128) runs rung 1, which has no persistent items: there the two are the same kernel, a
control. The time the mutant saves bounds what running the next item's first products under this item's epilogue
could save.
"""

import csv
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from fa2.bench import interleaved_rounds
from fa2.gluon import attention_hopper, dispatch
from fa2.testing import mutant, rel_err, time_ms

SHAPES = [(32, 32, 512, 128), (8, 32, 512, 128), (8, 32, 2048, 128)]       # bf16, causal
# (B, H, N, D, causal), bf16: the Gluon kernel's headline shapes (rescale_probe.py, mask_probe.py)
HEADLINE_SHAPES = [(32, 32, 512, 128, True), (8, 32, 2048, 128, True), (1, 32, 8192, 128, True),
                   (8, 32, 2048, 128, False)]
LSE = "    gl.store(lse_ptr + pid_bh.to(gl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)\n"
STORE = ("    gl.thread_barrier()\n    q_tile.store(o)\n    fence_async_shared()\n"
         "    tma.async_copy_shared_to_global(o_desc, [off_b, off_h, m_start, 0], q_smem)\n")
BARRIER = "    gl.thread_barrier()\n    q_tile.store(o)\n"


def guarded(lines, indent="    ", never="m_start < 0"):
    """`lines` under `if never:` at `indent`, a run-time condition that is never true there (`m_start` where the
    code has it; `_normalised`, which stores the LSE, has no `m_start`), indented one level more."""
    return (f"{indent}if {never}:  # never: skipped, its code kept\n"
            + "".join("    " + line + "\n" for line in lines.splitlines()))


PARTS = {"no_lse": {LSE: guarded(LSE, never="N_Q < 0")},
         "no_barrier": {BARRIER: guarded("    gl.thread_barrier()") + "    q_tile.store(o)\n"},
         "no_store": {STORE: guarded(STORE)}}
# O's way out one piece at a time: the shared-memory store (the TMA store then sends stale data: same HBM
# traffic, no stmatrix), the fence, the TMA store (no O written to global memory: a quarter less HBM traffic)
SMEM = "    q_tile.store(o)\n    fence_async_shared()\n"
FENCE = "    fence_async_shared()\n    tma.async_copy_shared_to_global"
TMA = "    tma.async_copy_shared_to_global(o_desc, [off_b, off_h, m_start, 0], q_smem)\n"
WAY_OUT = {"no_smem_store": {SMEM: guarded("    q_tile.store(o)") + "    fence_async_shared()\n"},
           "no_fence": {FENCE: guarded("    fence_async_shared()") + "    tma.async_copy_shared_to_global"},
           "no_tma_store": {TMA: guarded(TMA)},
           "no_store": PARTS["no_store"]}
# the persistent item's _write_out call (the return after it makes the text unique)
WRITE_OUT = ("        _write_out(acc, m_i, l_i, o_buf, o_tile, o_desc, lse_ptr, pid_bh, offs_m, off_b, off_h, m_start, "
             "N_Q,\n                   dtype, o_layout)\n")
RETURN = "    return base + gl.cdiv"
WHOLE = {WRITE_OUT + RETURN: guarded(WRITE_OUT, indent="        ") + RETURN}
# every mutant, built on import (tests/test_gpu_scripts.py imports this script, so an edit to the kernel that
# moves a line named above fails there, not on the GPU machine)
MUTANTS = {name: mutant(attention_hopper, edits) for name, edits in {"no_epilogue": WHOLE, **PARTS, **WAY_OUT}.items()}


def probe(path, shapes, variants, rounds, command):
    """Time, at each (B, H, N, D, causal) of `shapes` (bf16), the table's config as shipped and as each mutant module
    of `variants` {name: module}, each through a GluonPlan as fa2.attention launches it, beside SDPA's cuDNN backend,
    in `rounds` interleaved rounds (fa2.testing.time_ms on rotating input sets); the shipped output checked against
    cuDNN's first. A row per (shape, round, provider) to the CSV at `path`, `command` in its last column."""
    import fa2.gluon
    from fa2.plan import GluonPlan

    families = dispatch.shipped_families("NVIDIA H200")
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["B", "H", "N", "D", "dtype", "causal", "config", "round", "provider", "ms", "rel_err",
                         "device", "torch", "command"])
        for B, H, N, D, causal in shapes:
            sets = [[torch.randn(B, H, N, D, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
                    for _ in range(4)]
            q, k, v = sets[0]
            choice = dispatch.gluon_choice(q, k, v, causal, D ** -0.5, families)
            name = f"rung={choice[0]} " + " ".join(f"{key}={value}" for key, value in choice[1].items())
            plans = {"shipped": GluonPlan(q, k, v, causal, D ** -0.5, choice)}
            for variant, module in variants.items():
                fa2.gluon.attention_hopper = module           # the plan takes the kernel from the package
                try:
                    plans[variant] = GluonPlan(q, k, v, causal, D ** -0.5, choice)
                finally:
                    fa2.gluon.attention_hopper = attention_hopper

            def cudnn(q, k, v, causal=causal):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            fns = {p: lambda q, k, v, plan=plan: plan(q, k, v)[0] for p, plan in plans.items()}
            fns["sdpa_cudnn"] = cudnn
            err = rel_err(fns["shipped"](q, k, v), cudnn(q, k, v))
            assert err < 2e-2, (B, N, err)
            for variant in variants:
                fns[variant](q, k, v)                                # compiled before it is timed
            names = list(fns)
            times, errors = interleaved_rounds([lambda fn=fns[p]: time_ms(fn, sets) for p in names], rounds)
            for p, ms_list, error in zip(names, times, errors):
                assert not error, (p, error)
                for r, ms in enumerate(ms_list):
                    writer.writerow([B, H, N, D, "bf16", causal, name, r, p, f"{ms:.5f}",
                                     f"{err:.2e}" if p == "shipped" else "", torch.cuda.get_device_name(),
                                     torch.__version__, command])
                    print(f"({B}, {H}, {N}, {D}{', causal' if causal else ''}) round {r} {p:12s} {ms:.4f} ms",
                          flush=True)
    return path


def main(out, rounds=5, mode="whole"):
    names = ["no_epilogue"] + {"whole": [], "parts": list(PARTS), "way_out": list(WAY_OUT)}[mode]
    shapes = [shape + (True,) for shape in (SHAPES if mode == "whole" else SHAPES[:1])]
    path = Path(out) / {"whole": "epilogue_probe.csv", "parts": "epilogue_parts.csv",
                        "way_out": "epilogue_way_out.csv"}[mode]
    return probe(path, shapes, {name: MUTANTS[name] for name in names}, rounds,
                 f"python gpu/epilogue_probe.py OUT {rounds}" + ("" if mode == "whole" else f" {mode}"))


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]), *sys.argv[3:4])
