"""Where the PERSISTENT Gluon kernel went wrong (one subprocess per config and case: a fault loses the context).

    python gpu/persistent_debug.py          # prints, per config and case: O error, which LSE rows are wrong

FA2_GLUON_Q_BUFFERS (1 or 3) is read by the kernel of commit b82e252 only (three Q buffers picked by a run-time
index, or one indexed by the constant 0); the kernel since indexes its Q buffer by constants, and on it both
settings run the same code. book/results/gluon_persistent.md has the story.
"""
import subprocess
import sys

CONFIGS = {
    "r4pp_b3": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1, PERSISTENT=1, PRODUCER_REGS=32)),
    "r4_b2": (4, dict(BLOCK_N=64, NUM_BUFFERS=2, PERSISTENT=1, PRODUCER_REGS=32)),
    "r3_m64": (3, dict(BLOCK_M=64, BLOCK_N=64, NUM_BUFFERS=2, num_warps=4, maxnreg=128, PERSISTENT=1)),
    "r4pp_b3_plain": (4, dict(BLOCK_N=64, NUM_BUFFERS=3, PINGPONG=1)),
}
CASES = {"nc_300x1": (1, 2, 300, 1, False), "c_128": (2, 4, 128, 128, True), "c_1000": (2, 4, 1000, 1000, True)}


def one(name, case):
    import torch
    from fa2.gluon.attention_hopper import attention_gluon
    rung, config = CONFIGS[name]
    B, H, nq, nk, causal = CASES[case]
    torch.manual_seed(0)
    q = torch.randn(B, H, nq, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, H, nk, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o, lse = attention_gluon(q, k, v, causal, None, rung=rung, config=config)
    torch.cuda.synchronize()
    s = (q.double() @ k.double().transpose(-1, -2)) / 8.0
    if causal:
        s = s.masked_fill(torch.ones(nq, nk, device="cuda", dtype=torch.bool).tril(nk - nq).logical_not(), float("-inf"))
    ref_lse = torch.logsumexp(s, -1)
    ref = torch.softmax(s, -1) @ v.double()
    oerr = (o.double() - ref).abs().amax(-1)                      # (B, H, nq)
    lerr = (lse.double() - ref_lse).abs()
    bad_o = (oerr > 0.05).nonzero().tolist()
    bad_l = (lerr > 0.01).nonzero().tolist()
    print(f"{name} {case}: o max err {oerr.max().item():.3g}, bad o rows {len(bad_o)} {bad_o[:6]}; "
          f"lse bad rows {len(bad_l)} {bad_l[:8]}", flush=True)
    if bad_l:
        b, h, r = bad_l[0]
        got = lse[b, h, r].item()
        match = (ref_lse - got).abs().flatten().argmin().item()
        print(f"   lse[{b},{h},{r}] = {got:.4f}, ref {ref_lse[b, h, r].item():.4f}; nearest ref index (flat) {match} "
              f"= {(match // (H * nq), match // nq % H, match % nq)}; lse row values {lse[b, h, max(r-2,0):r+3].tolist()}",
              flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3:
        one(sys.argv[1], sys.argv[2])
    else:
        import os
        for qb in ("1", "3"):                        # FA2_GLUON_Q_BUFFERS=1: Q's shared buffer indexed by a constant
          for name in ("r3_m64", "r4pp_b3"):
            for case in CASES:
                print(f"Q_BUFFERS={qb}", end=" ", flush=True)
                r = subprocess.run([sys.executable, __file__, name, case], capture_output=True, text=True, timeout=60,
                                   env=dict(os.environ, FA2_GLUON_Q_BUFFERS=qb))
                out = (r.stdout + r.stderr).strip().splitlines()
                print("\n".join(l for l in out if not l.startswith(" ") or "lse[" in l)[-600:] if r.returncode == 0
                      else f"{name} {case}: rc {r.returncode}: {[l for l in out if 'Error' in l][-1:]}", flush=True)
