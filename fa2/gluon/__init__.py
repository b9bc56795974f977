"""FlashAttention forward kernels written in Triton's Gluon dialect (Hopper, sm_90): FlashAttention-3's techniques,
chapter 12. ``fa2.attention`` runs them on an sm_90 GPU only where ``fa2.gluon.dispatch``'s shipped table lists the
call's shape as measured faster than chapter 6's kernel and checked; everywhere else it keeps chapter 6's kernel.

Import ``fa2.gluon.attention_hopper`` for the kernels; this package itself imports nothing heavy, so that
``import fa2.gluon`` works on a Triton without Gluon (``available()`` says whether the kernels can be built).
"""

SUPPORTED_TRITON = ("3.6.",)     # Gluon's API changes between releases: the versions this code was compiled on


def available():
    """(ok, reason): whether this Triton has the Gluon API the kernels are written against."""
    try:
        import triton
    except ImportError as exc:      # pragma: no cover - triton is a dependency
        return False, f"triton is not importable: {exc}"
    if not triton.__version__.startswith(SUPPORTED_TRITON):
        return False, (f"the Gluon kernels are written against Triton {', '.join(SUPPORTED_TRITON)}x; "
                       f"this is {triton.__version__} (Gluon's API differs across versions)")
    try:
        import triton.experimental.gluon  # noqa: F401
        from triton.experimental.gluon.language.nvidia import hopper  # noqa: F401
    except ImportError as exc:
        return False, f"triton.experimental.gluon is missing: {exc}"
    return True, ""
