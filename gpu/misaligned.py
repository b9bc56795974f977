"""Diagnose a GPU failure (device tool): q 2 bytes past a 16-byte boundary, the generic (chapter 5) kernel.

Its output is book/results/misaligned_q_h200.log; there the SDPA row was labelled "sdpa math", but SDPA chose its
own backend (none was forced): on torch 2.11 / H200 it returned a wrong output (rel err 0.83-1.0) for such a q."""
import torch
import torch.nn.functional as F
import fa2
from fa2.chapters.forward import attention_forward
from fa2.chapters.reference import attention_reference

torch.manual_seed(0)
for D, N in ((32, 40), (64, 300), (128, 130)):
    k, v = (torch.randn(1, 4, N, D, device="cuda", dtype=torch.float16) for _ in range(2))
    buffer = torch.randn(4 * N * D + 1, device="cuda", dtype=torch.float16)
    q_off = buffer[1:].view(1, 4, N, D)
    q_al = q_off.clone()
    ref = attention_reference(q_al, k, v, True)
    err = lambda o: ((o.double() - ref).norm() / ref.norm()).item()
    for name, o in [("generic aligned", attention_forward(q_al, k, v, True)[0]),
                    ("generic misaligned", attention_forward(q_off, k, v, True)[0]),
                    ("generic misaligned 32x32", attention_forward(q_off, k, v, True, block_m=32, block_n=32)[0]),
                    ("fa2.attention misaligned", fa2.attention(q_off, k, v, causal=True)),
                    ("sdpa (own backend) misaligned", F.scaled_dot_product_attention(q_off, k, v, is_causal=True)),
                    ("fa2.attention aligned", fa2.attention(q_al, k, v, causal=True))]:
        print(f"D={D} N={N} {name:28s} rel err {err(o):.2e}", flush=True)
