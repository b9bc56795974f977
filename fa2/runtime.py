"""Where the kernels run: the GPU when there is one, otherwise the Triton interpreter on the CPU.

Import this module before anything imports `triton` (``import fa2`` does so first). It

* sets ``TRITON_INTERPRET=1`` when no CUDA GPU is present — the interpreter reads the variable once,
  when ``triton`` is first imported, so it has to be set before that;
* under the interpreter only, fixes two bf16 bugs of Triton 3.x's interpreter, which stores bf16 as raw
  ``uint16`` bits: ``tl.dot`` multiplies those bits as integers (we widen bf16 to fp32 exactly first: a
  bf16 is the top half of an fp32), and ``x.to(tl.bfloat16)`` truncates fp32 instead of rounding to
  nearest-even as the GPU does (a bias of -2^-9 on average, which doubles attention's bf16 error).
  On a GPU nothing is patched.

``DEVICE`` is where tensors for the kernels should live: ``"cuda"`` or ``"cpu"``.
"""

import os
import sys
import warnings

import torch

_GPU = torch.cuda.is_available()
if "TRITON_INTERPRET" not in os.environ and not _GPU:
    if "triton" in sys.modules:
        warnings.warn("fa2: triton was imported before fa2 on a machine without a GPU; "
                      "set TRITON_INTERPRET=1 before importing triton to run kernels on the CPU")
    else:
        os.environ["TRITON_INTERPRET"] = "1"

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
DEVICE = "cpu" if INTERPRET or not _GPU else "cuda"

import numpy as np  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


def bf16_bits_to_fp32(bits: np.ndarray) -> np.ndarray:
    """Exact widening of bf16 values stored as uint16 bits to float32."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def fp32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 (as uint16 bits) rounding to nearest, ties to even, like the GPU's cvt.rn.bf16.f32."""
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)).to(torch.bfloat16).view(torch.int16) \
        .numpy().view(np.uint16)


def _patch_interpreter_bf16() -> None:
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_fa2_bf16_fix", False):
        return
    unpatched = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16:
            a = interpreter.TensorHandle(bf16_bits_to_fp32(a.data), tl.float32)
        if b.dtype.scalar == tl.bfloat16:
            b = interpreter.TensorHandle(bf16_bits_to_fp32(b.data), tl.float32)
        return unpatched(self, a, b, d, input_precision, max_num_imprecise_acc)

    create_dot._fa2_bf16_fix = True
    create_dot.unpatched = unpatched  # kept so a test can show the bug the patch fixes
    builder.create_dot = create_dot

    unpatched_cast = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interpreter.TensorHandle(fp32_to_bf16_bits(src.data), tl.bfloat16)
        return unpatched_cast(self, src, dst_type)

    cast_impl.unpatched = unpatched_cast
    builder.cast_impl = cast_impl


if INTERPRET:
    _patch_interpreter_bf16()


def describe() -> str:
    """One line saying where kernels run, for the first output of every notebook."""
    if DEVICE == "cuda":
        cc = torch.cuda.get_device_capability()
        return (f"GPU: {torch.cuda.get_device_name()} (sm_{cc[0]}{cc[1]}), "
                f"torch {torch.__version__}, triton {triton.__version__}")
    return f"CPU: Triton interpreter, torch {torch.__version__}, triton {triton.__version__}"
