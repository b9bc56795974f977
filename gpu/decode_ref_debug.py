"""Why the decode bench's full-length check failed at 32k-128k keys for every provider alike: the fp64
reference on the GPU against the same reference on the CPU, and NaN counts in the caches, at the failing
shapes of book/results/decode.csv. Writes OUT/decode_ref_debug.txt."""
import sys

import torch

from fa2 import bench_decode as bd
from fa2.testing import rel_err

out = open(f"{sys.argv[1]}/decode_ref_debug.txt", "w")


def say(*a):
    print(*a, flush=True)
    print(*a, file=out, flush=True)


for B, N, page in ((1, 131072, 16), (8, 32768, 0), (1, 131072, 0), (8, 131072, 256)):
    shape = [s for s in bd.family() if s.B == B and s.N == N and s.page_size == page][0]
    g = torch.Generator("cuda").manual_seed(0)
    sets = bd.input_sets(shape, g)
    x = sets[0]
    say(shape, "sets", len(sets))
    for name, c in (("k", x.k_cache), ("v", x.v_cache)):
        say(f"  nan in {name}: {torch.isnan(c).sum().item()} of {c.numel()}, max |.| {c.float().nan_to_num().abs().max().item():.3g}")
    ref = bd.reference(x)
    say(f"  gpu ref finite {torch.isfinite(ref).all().item()} max {ref.abs().max().item():.3g}")
    cpu = bd.DecodeInputs(*(t.cpu() if t is not None else None for t in
                            (x.q, x.k_cache, x.v_cache, x.block_table, x.cache_seqlens)))
    ref_cpu = bd.reference(cpu)
    say(f"  cpu ref finite {torch.isfinite(ref_cpu).all().item()} max {ref_cpu.abs().max().item():.3g}; "
        f"gpu vs cpu rel {rel_err(ref.cpu(), ref_cpu):.3e}")
    import fa2
    o = fa2.decode(x.q, x.k_cache, x.v_cache, x.cache_seqlens, x.block_table)
    say(f"  fa2 vs cpu ref {rel_err(o.cpu(), ref_cpu):.3e}, fa2 vs gpu ref {rel_err(o, ref):.3e}")
    # the fp32 path of the same reference, pieces: where does the GPU one go wrong?
    from fa2.chapters.decode_reference import cache_rows
    k = cache_rows(x.k_cache, x.block_table, 0, N).double()
    kc = cache_rows(cpu.k_cache, cpu.block_table, 0, N).double()
    say(f"  cache_rows b=0 gpu vs cpu: max diff {(k.cpu() - kc).abs().nan_to_num(1e9).max().item():.3g}, "
        f"gpu nan {torch.isnan(k).sum().item()}")
    q_b = x.q[0].double().reshape(k.shape[0], -1, k.shape[-1])
    s = q_b @ k.transpose(-1, -2)
    s_cpu = q_b.cpu() @ kc.transpose(-1, -2)
    say(f"  scores gpu vs cpu: max diff {(s.cpu() - s_cpu).abs().nan_to_num(1e9).max().item():.3g}")
    del sets, x, cpu, k, kc, s, s_cpu
    torch.cuda.empty_cache()
