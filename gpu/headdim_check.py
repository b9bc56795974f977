"""Every head dim on the GPU, against fp64 and SDPA (fa2.testing.check_attention): python gpu/headdim_check.py OUT

For D in 32, 40, 64, 72, 80, 96, 128, 160, 192, 200, 256, both dtypes, causal and not, at (1, 8, 2, 1000, 1100, D)
(GQA, tails, N_Q < N_KV) and, causal, (1, 4, 1, 1100, 1000, D) (rows with no visible key):

* ``fa2.attention`` -- the product path: launch plan, shipped config, host descriptors -- three times on fresh
  inputs (the JIT launch, then the direct launch with descriptors encoded, then the encoding reused); bf16 only
  for 40, 72 and 200 (a head dim without a tuned config autotunes once: kept short);
* chapter 6's kernel with device-side descriptors (``attention_fast(host_desc=False)``).

One process per head dim (compiling is CPU work). Writes OUT/headdim_check.csv; exits 1 if any check failed.
"""

import csv
import multiprocessing
import sys
import traceback
from pathlib import Path

HEAD_DIMS = (32, 40, 64, 72, 80, 96, 128, 160, 192, 200, 256)
ODD_HEAD_DIMS = (40, 72, 200)           # fa2.attention in bf16 only (the device-descriptor kernel in both)
SHAPE = (1, 8, 2, 1000, 1100)           # (B, Hq, Hkv, N_Q, N_KV): GQA, tails, N_Q < N_KV
NO_KEY_SHAPE = (1, 4, 1, 1100, 1000)    # causal: the first 100 query rows see no key
COLUMNS = ["D", "pieces", "dtype", "causal", "path", "shape", "kernel", "config", "encoded", "err", "sdpa_err",
           "bound_used", "lse_bound_used", "check", "error"]


def check_head_dim(D):
    import torch

    import fa2
    from fa2 import plan as plans, runtime
    from fa2.chapters.fast import attention_fast, head_dim_pieces
    from fa2.testing import check_attention

    rows = []
    api = lambda q, k, v, causal, scale: fa2.attention(q, k, v, causal=causal, scale=scale, return_lse=True)
    device = lambda q, k, v, causal, scale: attention_fast(q, k, v, causal, scale, host_desc=False)
    for dtype in (torch.float16, torch.bfloat16):
        for causal in (False, True):
            shapes = [SHAPE] + [NO_KEY_SHAPE] * causal
            for shape in shapes:
                paths = [("fa2.attention", api, 3), ("attention_fast device desc", device, 1)]
                if D in ODD_HEAD_DIMS and dtype == torch.float16:   # 40 has no tuned config: it would autotune
                    paths = paths[1:]
                for path, fn, repeats in paths:
                    for _ in range(repeats):
                        row = dict(D=D, pieces="+".join(map(str, head_dim_pieces(D))), dtype=str(dtype)[6:],
                                   causal=causal, path=path, shape="x".join(map(str, shape)))
                        try:
                            row.update(check_attention(fn, *shape, D, dtype, causal), check="ok")
                        except Exception as exc:
                            row.update(check="fail" if isinstance(exc, AssertionError) else "error",
                                       error=f"{type(exc).__name__}: {exc}"[:300])
                            traceback.print_exc()
                        if path == "fa2.attention":          # the plan those calls took
                            B, Hq, Hkv, Nq, Nk = shape
                            q = torch.empty(B, Hq, Nq, D, device=runtime.DEVICE, dtype=dtype)
                            k = torch.empty(B, Hkv, Nk, D, device=runtime.DEVICE, dtype=dtype)
                            plan = plans.plan_for(q, k, k, causal, None)
                            row.update(kernel=plan.kernel, config=plan.config,
                                       encoded=bool(getattr(plan, "encoded", None)))
                        rows.append(row)
    return rows


def main(out):
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with multiprocessing.get_context("spawn").Pool(len(HEAD_DIMS)) as pool:
        rows = [row for rows in pool.map(check_head_dim, HEAD_DIMS) for row in rows]
    with open(out / "headdim_check.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    bad = [r for r in rows if r["check"] != "ok"]
    for r in rows:
        print(f"D={r['D']:3d} ({r['pieces']:>6s}) {r['dtype']:8s} causal={r['causal']!s:5} {r['shape']:18s} "
              f"{r['path']:27s} {r['check']:5s} err {r.get('err', float('nan')):.2e} "
              f"(SDPA {r.get('sdpa_err', float('nan')):.2e}) bound used {r.get('bound_used', float('nan')):.2f} "
              f"{r.get('kernel', '')} encoded={r.get('encoded', '')} {r.get('config', '')}")
    print(f"{len(rows) - len(bad)}/{len(rows)} checks passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
