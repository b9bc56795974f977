"""What a chapter's cells ask about the reader's machine, and the one style of the book's figures.

A chapter runs to the end on any GPU a reader has, a Colab T4 (sm_75: fp16 only) included, and on the
CPU under the Triton interpreter. A cell that needs more asks first and skips with a visible note:

    from fa2 import notebook as nb
    for dtype in nb.dtypes():              # fp16, and bf16 where the GPU has it
        ...
    if nb.is_hopper():                     # sm_90+: TMA descriptors, the Hopper kernel
        ...
    else:
        nb.skip("the Hopper path needs an sm_90 GPU")

``FA2_DISABLE=bf16,hopper`` turns those capabilities off on a GPU that has them, to rehearse a T4 run.
"""

import os

import torch

from fa2 import runtime

_DISABLE_VAR = "FA2_DISABLE"


def _disabled(capability: str) -> bool:
    names = os.environ.get(_DISABLE_VAR, "").replace(",", " ").split()
    return capability in names


def capability() -> tuple:
    """The GPU's compute capability, e.g. (9, 0) on an H100/H200; (0, 0) under the interpreter."""
    if runtime.DEVICE != "cuda":
        return (0, 0)
    return torch.cuda.get_device_capability()


def has_bf16() -> bool:
    """Can kernels take bf16 here? Yes under the interpreter and on sm_80+ (Ampere and newer)."""
    if _disabled("bf16"):
        return False
    if runtime.DEVICE != "cuda":
        return True                      # fa2.runtime fixes the interpreter's bf16 arithmetic
    return capability() >= (8, 0)        # a T4 emulates bf16 in torch, but Triton has no bf16 dot there


def is_hopper() -> bool:
    """Is this an sm_90+ GPU (H100/H200 and newer), where chapter 6's Hopper path runs?"""
    return not _disabled("hopper") and capability() >= (9, 0)


def skip(reason: str) -> None:
    """Say, in the cell's output, that a cell skipped its work and why."""
    print(f"[skipped] {reason}")


def dtypes() -> tuple:
    """The input dtypes to check on this machine: fp16, and bf16 where has_bf16() (else a note)."""
    if has_bf16():
        return (torch.float16, torch.bfloat16)
    why = f"{_DISABLE_VAR} turns bf16 off" if _disabled("bf16") else f"{describe_gpu()} has no bf16"
    skip(f"bf16: {why}; checking fp16 only")
    return (torch.float16,)


def describe_gpu() -> str:
    """'NVIDIA H200 (sm_90)', or 'the interpreter' on the CPU."""
    if runtime.DEVICE != "cuda":
        return "the interpreter"
    major, minor = capability()
    return f"{torch.cuda.get_device_name()} (sm_{major}{minor})"


FIGURE_DPI = 100


def figure_style() -> None:
    """One look for every figure of the book: small, 100 dpi, light grid, no top/right spines."""
    import matplotlib as mpl

    mpl.rcParams.update({
        "figure.dpi": FIGURE_DPI,
        "savefig.dpi": FIGURE_DPI,
        "figure.figsize": (9, 3.2),
        "font.size": 10,
        "axes.titlesize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
    })
