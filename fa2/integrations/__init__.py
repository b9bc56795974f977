"""Integrations with other libraries, each imported on first use so that `import fa2` imports none of them.

    fa2.integrations.transformers.register()      # attn_implementation="fa2" in Hugging Face models
"""

import importlib

INTEGRATIONS = ("transformers",)


def __getattr__(name):
    if name in INTEGRATIONS:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
