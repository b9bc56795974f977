#!/usr/bin/env python3
"""The project's two commands, with all set-up included (stdlib only, needs Python 3.10+):

    python3 dev.py test    # install into .venv, then run every check (pytest + nbval + export sync)
    python3 dev.py book    # install into .venv, build the book into _build/html, check the pages

Without a GPU, kernels run under the Triton interpreter. Environment knobs (CI uses them):

    FA2_TORCH   how torch is installed when the environment has none (default: torch==2.13.0 on CPU-only
                machines, where that build is cached)
    FA2_VENV    the virtual environment to use (default .venv)
    FA2_TRITON  a pip requirement installed over the pinned Triton, e.g. "triton==3.5.1", or "triton" for the
                newest release the index serves
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("FA2_VENV", ".venv")
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def sh(*cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    subprocess.run(list(map(str, cmd)), check=True, cwd=ROOT, **kw)


def has(module: str) -> bool:
    return subprocess.run([str(PY), "-c", f"import {module}"], capture_output=True).returncode == 0


def setup() -> None:
    if not PY.exists():
        sh(sys.executable, "-m", "venv", VENV)
    if not has("torch"):
        # A CPU machine needs no CUDA build of several GB; a GPU machine keeps whatever torch it brings.
        sh(PY, "-m", "pip", "install", "-q", os.environ.get("FA2_TORCH", "torch==2.13.0"))
    sh(PY, "-m", "pip", "install", "-q", "-r", "requirements-dev.txt", "-e", ".")
    triton = os.environ.get("FA2_TRITON")
    if triton:
        sh(PY, "-m", "pip", "install", "-q", "--upgrade", triton)
    sh(PY, "-c", "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__)")


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what not in ("test", "book"):
        print(__doc__)
        return 2
    setup()
    if what == "test":
        return subprocess.run([str(PY), "-m", "pytest", "-n", "2", "--dist", "loadfile", *sys.argv[2:]],
                              cwd=ROOT).returncode
    jb = PY.parent / ("jupyter-book.exe" if os.name == "nt" else "jupyter-book")
    built = subprocess.run([str(jb), "build", ".", "-W", "--keep-going", *sys.argv[2:]], cwd=ROOT).returncode
    if built:
        return built
    # The built pages as a reader gets them: local MathJax, code that fits, links that resolve.
    return subprocess.run([str(PY), "-m", "pytest", "-q", "tests/test_book_html.py"], cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
