"""Host time of a launch plan's call: where a Gluon plan's extra microseconds go (book/results/tiny_host.csv has
its calls 3-5 us slower on the host than chapter 6's plan at N = 512).

    python gpu/plan_host.py OUT      # OUT/plan_host.txt

For (1, 16, 512, 64) fp16 causal: fa2.attention's plan (the Gluon kernel there) and chapter 6's, each: which
launch path it takes (descriptors encoded once per address, or re-encoded by Triton's launcher every call), host
µs per call in a loop of 5000, and a cProfile of 2000 calls (the top entries by own time).
"""

import cProfile
import io
import pstats
import sys
from pathlib import Path

import torch

from fa2 import plan as fa2_plan
from overhead import wall_us


def main(out):
    lines = []
    q, k, v = (torch.randn(1, 16, 512, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    plans = {"fa2.attention": fa2_plan.plan_for(q, k, v, True, None),
             "chapter 6": fa2_plan.chapter6_plan(q, k, v, True, None)}
    for name, plan in plans.items():
        plan(q, k, v)
        plan(q, k, v)
        torch.cuda.synchronize()
        encoded = getattr(plan, "encoded", None)
        lines.append(f"{name}: kernel {plan.kernel}, ready {plan.launch.ready()}, encoded {type(encoded).__name__}"
                     f" {encoded!r:.80}")
        if hasattr(plan.launch, "compiled") and plan.launch.compiled is not None:
            run = plan.launch.compiled.run
            lines.append(f"  launcher: scratch {getattr(run, 'global_scratch_size', '?')}, profile scratch "
                         f"{getattr(run, 'profile_scratch_size', '?')}, pdl {getattr(run, 'launch_pdl', '?')}, "
                         f"cooperative {getattr(run, 'launch_cooperative_grid', '?')}")
            wrapper = getattr(run, "launch", None)
            if wrapper is not None and getattr(wrapper, "__closure__", None):
                cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
                lines.append(f"  wrapper cells: { {key: repr(val)[:80] for key, val in cells.items()} }")
        lines.append(f"  args after the descriptors: {len(getattr(plan, 'rest', getattr(plan, 'scalars', ())))}")
        for _ in range(3):
            lines.append(f"  host us per call: {wall_us(lambda: plan(q, k, v), n=5000, warmup=100):.2f}")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(2000):
            plan(q, k, v)
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
        lines.append(text.getvalue())
    Path(out, "plan_host.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
