"""SHARED_ITEM's kernel code and candidates are in commit ad98890 only (removed after these runs:
book/results/shared_item.md); check it out to run this.

Where SHARED_ITEM goes wrong (gpu/shared_item2.sh: 38/48 D = 128 cases right, failures that move between dtypes).

    python gpu/shared_item_probe.py NAME      # one candidate of fa2/gluon/candidates.py; prints per case and run

Each case runs three times on the same inputs beside the config without SHARED_ITEM; per run: the largest error
against the fp64 reference in each consumer's rows (query rows mod 128 below 64: consumer 0), the rows whose LSE is
wrong, and whether the output equals the first run's (a race shows as runs that differ).
"""
import sys

import torch

from fa2.gluon.attention_hopper import attention_gluon
from fa2.gluon.candidates import CONFIGS

CASES = [(1, 2, 2, 300, 1, False), (2, 4, 4, 128, 128, True), (2, 2, 2, 257, 129, True), (1, 2, 2, 300, 300, False)]


def reference(q, k, v, causal):
    nq, nk = q.shape[2], k.shape[2]
    s = (q.double() @ k.double().transpose(-1, -2)) / q.shape[-1] ** 0.5
    if causal:
        keep = torch.ones(nq, nk, device=q.device, dtype=torch.bool).tril(nk - nq)
        s = s.masked_fill(~keep, float("-inf"))
    return torch.softmax(s, -1) @ v.double(), torch.logsumexp(s, -1)


def main(name):
    rung, config = CONFIGS[name]
    plain = {k: v for k, v in config.items() if k != "SHARED_ITEM"}
    for B, H, Hkv, nq, nk, causal in CASES:
        torch.manual_seed(0)
        q = torch.randn(B, H, nq, 128, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(B, Hkv, nk, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        ref, ref_lse = reference(q, k, v, causal)
        rows = torch.arange(nq, device="cuda") % 128 < 64
        first = None
        for label, cfg in [("plain", plain)] + [(f"shared{i}", config) for i in range(3)]:
            o, lse = attention_gluon(q, k, v, causal, None, rung=rung, config=cfg)
            torch.cuda.synchronize()
            err = (o.double() - ref).abs().amax(-1)                   # (B, H, nq)
            bad_lse = ((lse.double() - ref_lse).abs() > 1e-2).nonzero()[:, 2].unique().tolist()
            same = "" if first is None else f" equal to run 0: {torch.equal(o, first)}"
            if label == "shared0":
                first = o.clone()
            print(f"{name} {B}x{H}x{nq}x{nk} {'causal' if causal else 'full'} {label}: err consumer0 "
                  f"{err[..., rows].max().item():.3g} consumer1 {err[..., ~rows].max().item():.3g}; "
                  f"bad lse rows {len(bad_lse)} {bad_lse[:8]}{same}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
