"""Chapter 7: the bug catalog -- each classic FlashAttention bug as a source edit of the exported kernels."""
import torch

from fa2.chapters import fast, forward, kv_loop
from fa2.testing import mutant

# Each bug is a set of source edits {old text: new text} per generated module: chapter 4's loop (kv_loop),
# chapter 5's kernel around it (forward) and chapter 6's Hopper kernel (fast). A kernel with no entry has no
# such code. `case` is a check_attention shape that exposes the bug on a CPU; None: only a GPU can show it.
BUGS = {
    "state_low_precision": dict(
        kv_loop={"row_sum = row_sum * alpha + tl.sum(p, axis=1)":
                 "row_sum = (row_sum * alpha + tl.sum(p, axis=1)).to(q.dtype).to(tl.float32)",
                 "acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)":
                 "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(q.dtype).to(tl.float32)"},
        fast={"row_sum = row_sum * alpha + tl.sum(p, axis=1)":
              "row_sum = (row_sum * alpha + tl.sum(p, axis=1)).to(q.dtype).to(tl.float32)",
              "acc = tl.dot(p.to(v.dtype), v, acc)":
              "acc = tl.dot(p.to(v.dtype), v, acc).to(q.dtype).to(tl.float32)"},
        case=None),
    "scale_after_max": dict(
        kv_loop={"scores = tl.dot(q, k) * scale": "scores = tl.dot(q, k)",
                 "p = tl.exp(scores - m_safe[:, None])": "p = tl.exp(scores * scale - m_safe[:, None])"},
        fast={"tl.max(scores, axis=1) * qk_scale)": "tl.max(scores, axis=1))"},
        case=dict(Nq=32, Nk=64, D=64)),
    "scores_low_precision": dict(
        kv_loop={"scores = tl.dot(q, k) * scale": "scores = tl.dot(q, k).to(q.dtype).to(tl.float32) * scale"},
        fast={"scores = tl.dot(q, k.T)": "scores = tl.dot(q, k.T).to(q.dtype).to(tl.float32)"},
        case=dict(Nq=32, Nk=64, dtype=torch.bfloat16)),
    "mask_with_zero": dict(
        kv_loop={'tl.where(visible, scores, float("-inf"))': "tl.where(visible, scores, 0.0)"},
        fast={'tl.where(visible, scores * qk_scale, float("-inf"))': "tl.where(visible, scores * qk_scale, 0.0)"},
        case=dict(Nq=32, Nk=32, causal=True)),
    "causal_diagonal_excluded": dict(
        kv_loop={"kv_idx[None, :] <= offs_m": "kv_idx[None, :] < offs_m"},
        fast={"kv_idx[None, :] <= offs_m": "kv_idx[None, :] < offs_m"},
        case=dict(Nq=32, Nk=32, causal=True)),
    "causal_reversed": dict(
        kv_loop={"kv_idx[None, :] <= offs_m": "kv_idx[None, :] >= offs_m"},
        fast={"kv_idx[None, :] <= offs_m": "kv_idx[None, :] >= offs_m"},
        case=dict(Nq=32, Nk=32, causal=True)),
    "max_assigned_before_rescale": dict(
        kv_loop={"alpha = tl.exp(row_max - m_safe)": "row_max = m_new\n        alpha = tl.exp(row_max - m_safe)"},
        fast={"alpha = tl.math.exp2(row_max - m_safe)":
              "row_max = m_new\n        alpha = tl.math.exp2(row_max - m_safe)"},
        case=dict(Nq=32, Nk=64)),
    "no_rescale_of_acc": dict(
        kv_loop={"acc = acc * alpha[:, None] + tl.dot(": "acc = acc + tl.dot("},
        fast={"acc = acc * alpha[:, None]\n": "acc = acc\n"},
        case=dict(Nq=32, Nk=64)),
    "tail_not_masked": dict(
        kv_loop={"visible = kv_ok[None, :]": "visible = offs_n[None, :] >= 0"},
        fast={"visible = kv_idx[None, :] < N_KV": "visible = kv_idx[None, :] >= 0"},
        case=dict(Nq=32, Nk=40)),
    "empty_row_nan": dict(
        forward={"acc / safe_sum[:, None]": "acc / row_sum[:, None]"},
        fast={"acc / safe_sum[:, None]": "acc / row_sum[:, None]"},
        case=dict(Nq=40, Nk=24, causal=True)),
    "causal_top_left": dict(
        kv_loop={"diagonal = N_KV - N_Q ": "diagonal = 0 "},
        forward={"m_start + BLOCK_M + N_KV - N_Q)": "m_start + BLOCK_M)"},
        fast={"diagonal = N_KV - N_Q\n    for": "diagonal = 0\n    for",
              "diagonal = N_KV - N_Q\n    kv_end": "diagonal = 0\n    kv_end"},
        case=dict(Nq=24, Nk=40, causal=True)),
    "gqa_modulo": dict(
        forward={"off_kv_h = off_h // GROUP_SIZE": "off_kv_h = off_h % (H // GROUP_SIZE)"},
        fast={"off_kv_h = off_h // GROUP_SIZE": "off_kv_h = off_h % (H // GROUP_SIZE)"},
        case=dict(Hq=4, Hkv=2, Nq=32, Nk=32)),
    "int32_offsets": dict(
        forward={"off_b = (pid_bh // H).to(tl.int64)": "off_b = pid_bh // H",
                 "off_h = (pid_bh % H).to(tl.int64)": "off_h = pid_bh % H",
                 "m_start.to(tl.int64) * stride_qm": "m_start * stride_qm",
                 "m_start.to(tl.int64) * stride_om": "m_start * stride_om"},
        fast={"off_b.to(tl.int64), off_h.to(tl.int64), off_kv_h.to(tl.int64)": "off_b, off_h, off_kv_h"},
        case=None),
    "split_boundary_off_by_one": dict(
        fast={"max(0, m_start + diagonal + 1)": "max(0, m_start + diagonal + 2)"},
        case=dict(Nq=34, Nk=48, causal=True)),
    "causal_loop_end_off_by_one": dict(
        forward={"m_start + BLOCK_M + N_KV - N_Q)": "m_start + BLOCK_M + N_KV - N_Q - 1)"},
        fast={"m_start + BLOCK_M + diagonal))": "m_start + BLOCK_M + diagonal - 1))"},
        case=dict(Nq=32, Nk=49, causal=True)),
    "lse_row_sum_biased": dict(
        forward={"tl.log(safe_sum)": "tl.log(safe_sum * 1.01)"},
        fast={"tl.log(safe_sum)": "tl.log(safe_sum * 1.01)"},
        case=dict(Nq=32, Nk=32)),
}
KERNELS = ("generic", "fast")           # chapter 5's attention_forward, chapter 6's attention_fast
BLOCK = 16                              # tile rows on a CPU: more tiles per shape, the interpreter stays quick
BASE_CASE = dict(B=1, Hq=2, Hkv=1, D=16, dtype=torch.float16, causal=False)


def has_bug(name, kernel):
    """Does the kernel contain the code that bug `name` gets wrong?"""
    edits = BUGS[name]
    return bool(edits.get("fast")) if kernel == "fast" else bool(edits.get("kv_loop") or edits.get("forward"))


def mutant_module(name, kernel):
    """The generated module of `kernel` ("generic" or "fast") with bug `name` switched in."""
    edits = BUGS[name]
    if kernel == "fast":
        return mutant(fast, edits["fast"])
    loop = mutant(kv_loop, edits["kv_loop"]) if "kv_loop" in edits else kv_loop
    return mutant(forward, edits.get("forward", {}), imports={"fa2.chapters.kv_loop": loop})


def attention_fn(module, kernel, block=BLOCK, host_desc=True):
    """fn(q, k, v, causal, scale) -> (o, lse) running `module`'s kernel (a mutant or the original)."""
    if kernel == "fast":
        config = dict(BLOCK_M=block, BLOCK_N=block)
        return lambda q, k, v, causal, scale: module.attention_fast(q, k, v, causal, scale, config=config,
                                                                    host_desc=host_desc)
    return lambda q, k, v, causal, scale: module.attention_forward(q, k, v, causal, scale, block, block)


def exposing_case(name):
    """check_attention's keyword arguments for the shape that shows bug `name` (None: GPU only)."""
    case = BUGS[name]["case"]
    return None if case is None else dict(BASE_CASE, **case)
