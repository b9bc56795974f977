#!/usr/bin/env python3
"""The project's two commands, with all set-up included (stdlib only, needs Python 3.10+):

    python3 dev.py test    # install into .venv, then run every check (pytest + nbval + export sync)
    python3 dev.py book    # install into .venv, build the book into _build/html, check the pages

and the release check (CI runs it too):

    python3 dev.py wheel   # `python -m build` into dist/, check what the wheel and sdist hold, install the
                           # wheel into a fresh venv and smoke-test it there; then the same from the
                           # checkout's git URL (what Colab's setup cell does)

Without a GPU, kernels run under the Triton interpreter. Environment knobs (CI uses them):

    FA2_TORCH   how torch is installed when the environment has none, the wheel's fresh venv included
                (default: torch==2.13.0, whose CPU build CPU-only machines have cached)
    FA2_VENV    the virtual environment to use (default .venv)
    FA2_TRITON  a pip requirement installed over the pinned Triton, e.g. "triton==3.5.1", or "triton" for the
                newest release the index serves
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / os.environ.get("FA2_VENV", ".venv")
TORCH = os.environ.get("FA2_TORCH", "torch==2.13.0")


def python_in(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


PY = python_in(VENV)


def sh(*cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    kw.setdefault("cwd", ROOT)
    subprocess.run(list(map(str, cmd)), check=True, **kw)


def has(module: str) -> bool:
    return subprocess.run([str(PY), "-c", f"import {module}"], capture_output=True).returncode == 0


def setup() -> None:
    if not PY.exists():
        sh(sys.executable, "-m", "venv", VENV)
    if not has("torch"):
        # A CPU machine needs no CUDA build of several GB; a GPU machine keeps whatever torch it brings.
        sh(PY, "-m", "pip", "install", "-q", TORCH)
    sh(PY, "-m", "pip", "install", "-q", "-r", "requirements-dev.txt", "-e", ".")
    triton = os.environ.get("FA2_TRITON")
    if triton:
        sh(PY, "-m", "pip", "install", "-q", "--upgrade", triton)
    sh(PY, "-c", "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__)")


def wheel() -> int:
    """Build the release, check what it holds, and smoke-test it where a user would have it: installed into a
    fresh venv, run from outside the checkout. Then reinstall it from the checkout's git URL and run the smoke
    test again. The fresh venv gets torch as FA2_TORCH says and the Triton of .venv, both from pip's cache
    (the other Tritons have their own CI runs), without byte-compiling them; the rest as the wheel asks."""
    times = []

    def step(what, *cmd, **kw):
        start = time.perf_counter()
        sh(*cmd, **kw)
        times.append(f"{what} {time.perf_counter() - start:.0f} s")

    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    step("build", PY, "-m", "build", "--outdir", dist, ".")   # the sdist, then the wheel built from the sdist
    sh(PY, "tools/wheel_smoke.py", "--contents", dist)
    triton = subprocess.run([str(PY), "-c", "import triton; print(triton.__version__)"], check=True,
                            capture_output=True, text=True).stdout.strip()
    smoke_test = ROOT / "tools" / "wheel_smoke.py"
    tmp = Path(tempfile.mkdtemp(prefix="fa2-wheel-"))
    try:
        venv = tmp / "venv"
        py = python_in(venv)
        step("venv", sys.executable, "-m", "venv", venv)
        step("install", py, "-m", "pip", "install", "-q", "--no-compile", TORCH, f"triton=={triton}",
             next(dist.glob("*.whl")))
        step("smoke", py, smoke_test, cwd=tmp)              # not the checkout: `import fa2` is the installed one
        if (ROOT / ".git").exists():                        # as Colab's setup cell installs it
            step("git install", py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall",
                 f"git+{ROOT.as_uri()}")
            step("smoke", py, smoke_test, cwd=tmp)
        else:
            print("(not a git checkout: the git-URL install is not tried)")
    finally:
        start = time.perf_counter()
        shutil.rmtree(tmp, ignore_errors=True)
        times.append(f"removing the venv {time.perf_counter() - start:.0f} s")
    print(f"dev.py wheel: built, checked and smoke-tested ({', '.join(times)})", flush=True)
    return 0


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what not in ("test", "book", "wheel"):
        print(__doc__)
        return 2
    setup()
    if what == "wheel":
        return wheel()
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
