"""Which step of the decode sweep spoils the full-length check (book/results/decode.csv failed at 32k-128k
keys for every provider alike, while the same inputs and reference pass in a fresh process)? Runs the sweep's
own loop over a few shapes and fingerprints the reference and the first input set around every provider."""
import sys

import torch

from fa2 import bench_decode as bd

log = open(f"{sys.argv[1]}/decode_bench_debug.txt", "w")


def say(*a):
    print(*a, flush=True)
    print(*a, file=log, flush=True)


def fingerprint(x, ref):
    f = lambda t: (torch.isnan(t).sum().item(), t.float().nan_to_num().sum().item())
    return (f(ref), f(x.k_cache), f(x.v_cache), x.cache_seqlens.tolist()[:2])


state = {}
original_reference, original_measure = bd.reference, bd.measure


def reference(x, cache_seqlens=None):
    ref = original_reference(x, cache_seqlens)
    if cache_seqlens is None:
        state.update(x=x, ref=ref, fp=fingerprint(x, ref))
        say("  ref", state["fp"])
    return ref


def measure(provider, shape, sets, ref, full=True):
    fp = fingerprint(sets[0], ref)
    if fp != state["fp"]:
        say(f"  CHANGED before {provider.label}: {fp}")
        state["fp"] = fp
    row = original_measure(provider, shape, sets, ref, full)
    fp = fingerprint(sets[0], ref)
    if fp != state["fp"]:
        say(f"  CHANGED after {provider.label}: {fp}")
        state["fp"] = fp
    if row.get("check") == "fail":
        say(f"  {provider.label}: check fail, rel_err {row.get('rel_err')}; fresh ref says "
            f"{bd.rel_err(provider.build(shape, sets)(sets[0]), original_reference(sets[0])):.3e}")
    return row


bd.reference, bd.measure = reference, measure
pick = lambda B, N, page: [s for s in bd.family() if (s.B, s.N, s.page_size) == (B, N, page)][0]
shapes = bd.family()[:16]                          # B=1: every length up to 128k contiguous
for shape in shapes:
    say(shape)
    bd.run_shapes([shape], list(bd.providers()), lambda row: None, tune=False)
