"""Where the kernels run: the GPU when there is one, otherwise the Triton interpreter on the CPU.

Import this module before anything imports `triton` (``import fa2`` does so first). It

* sets ``TRITON_INTERPRET=1`` when no CUDA GPU is present — the interpreter reads the variable once,
  when ``triton`` is first imported, so it has to be set before that;
* under the interpreter only, fixes two bf16 bugs of Triton 3.x's interpreter, which stores bf16 as raw
  ``uint16`` bits: ``tl.dot`` multiplies those bits as integers, and ``x.to(tl.bfloat16)`` truncates fp32
  instead of rounding to nearest-even as the GPU does (a bias of -2^-9 on average, which doubles attention's
  bf16 error). The fixes live in ``fa2/_triton_compat.py`` with Triton's other internals. On a GPU nothing is
  patched.

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

import triton  # noqa: E402

if INTERPRET:
    from fa2._triton_compat import (patch_interpreter_bf16, patch_interpreter_descriptor_strides,  # noqa: E402
                                    patch_interpreter_device_calls)

    patch_interpreter_bf16()
    patch_interpreter_descriptor_strides()
    patch_interpreter_device_calls()


def describe() -> str:
    """One line saying where kernels run, for the first output of every notebook."""
    if DEVICE == "cuda":
        cc = torch.cuda.get_device_capability()
        return (f"GPU: {torch.cuda.get_device_name()} (sm_{cc[0]}{cc[1]}), "
                f"torch {torch.__version__}, triton {triton.__version__}")
    return f"CPU: Triton interpreter, torch {torch.__version__}, triton {triton.__version__}"
