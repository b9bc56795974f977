#!/usr/bin/env python3
"""The project's two commands, with all set-up included (stdlib only, needs Python 3.10+):

    python3 dev.py test    # install into .venv, then run every check (pytest + nbval + export sync)
    python3 dev.py book    # install into .venv, build the book into _build/html, check the pages

and the release check (CI runs it too):

    python3 dev.py wheel   # `python -m build` into dist/, check what the wheel and sdist hold, install the
                           # wheel into a fresh venv and smoke-test it there; then the same from the
                           # checkout's git URL (what Colab's setup cell does)

    python3 dev.py setup   # only the set-up that the others do first (CI runs it in the background)

Each command sets its venv up first, and skips that when the venv was last set up, to the end, from the same
requirement files, pyproject.toml, fa2/_version.py and knobs (delete VENV/fa2-setup.txt to force it).

Without a GPU, kernels run under the Triton interpreter. Environment knobs (CI uses them):

    FA2_TORCH   how torch is installed when the environment has none, the wheel's fresh venv included
                (default: torch==2.13.0, whose CPU build CPU-only machines have cached)
    FA2_VENV    the virtual environment to use (default .venv)
    FA2_TRITON  a pip requirement for Triton in place of the pinned one, e.g. "triton==3.5.1", or "triton" for
                the newest release the index serves when the venv is set up. For `test` and `setup` the venv
                then gets what the tests need (requirements-test.txt) with that Triton, in one install, and not
                the book's and the release's tools; `book` and `wheel` install it over requirements-dev.txt's
    FA2_INSTALLER  "uv" (default) or "pip": what installs into the venv. uv (installed into the venv by pip first,
                ~5 s) resolves and installs in parallel: CI's three set-ups side by side took ~5 min with pip on two
                cores. uv reads no pip configuration, so pip's index, find-links and constraint settings are passed
                on to it; if uv cannot be installed, pip does the rest. The wheel's fresh venv always uses pip, as a
                user would
"""

import contextlib
import hashlib
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


@contextlib.contextmanager
def checkout_lock():
    """Held while pip writes into the checkout: an editable install and `python -m build` both write
    fa2_triton.egg-info there, and CI sets venvs up side by side (POSIX; elsewhere nothing runs side by side)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    fd = os.open(ROOT, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                                     # closing it releases the lock


def pip_settings() -> list:
    """pip's index, find-links and constraint settings (its configuration files and PIP_* variables) as uv options."""
    return uv_options(subprocess.run([str(PY), "-m", "pip", "config", "list"], capture_output=True, text=True).stdout)


def uv_options(listed: str) -> list:
    """`pip config list`'s output (lines `scope.name='value'`, scope `:env:` for PIP_* variables) as uv options:
    extra indexes, find-links and constraints, each location once and only those that exist (pip ignores the
    others), and the index URL, the environment's before a file's."""
    values, env_index, file_index = {}, None, None
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        scope, _, name = key.rpartition(".")
        where = value.strip().strip("'\"").split()
        if name == "index-url" and where:
            env_index, file_index = (where[0], file_index) if scope == ":env:" else (env_index, where[0])
        else:
            values.setdefault(name, []).extend(where)

    def exists(where):                                  # a URL, or a folder or file that is there
        return ("://" in where and not where.startswith("file:")) or \
            Path(where.removeprefix("file://").removeprefix("file:")).exists()

    options = []
    for name, flag in (("extra-index-url", "--extra-index-url"), ("find-links", "--find-links"),
                       ("constraint", "--constraint")):
        for where in dict.fromkeys(values.get(name, [])):
            if exists(where):
                options += [flag, where]
    index = env_index or file_index
    return options + (["--index-url", index] if index else [])


def installer() -> list:
    """The command that installs into VENV: uv's `pip install` with pip's settings (see FA2_INSTALLER), or pip."""
    pip = [PY, "-m", "pip", "install", "-q"]
    if os.environ.get("FA2_INSTALLER", "uv") == "pip":
        return pip
    if not has("uv"):
        try:
            sh(*pip, "uv")
        except subprocess.CalledProcessError:
            print("+ (uv could not be installed: pip installs)", flush=True)
            return pip
    # unsafe-best-match: the best version over every index, as pip takes it (uv's default stops at the first
    # index that has the package, and the extra index CI names for torch's CPU build serves other packages too)
    return [PY, "-m", "uv", "pip", "install", "-q", "--python", PY, "--index-strategy", "unsafe-best-match",
            *pip_settings()]


def setup(what: str) -> None:
    triton = os.environ.get("FA2_TRITON")
    # A venv for another Triton runs the package tests (CI's oldest and newest): it gets what they need and that
    # Triton, resolved together in one install, instead of requirements-dev.txt's Triton replaced afterwards.
    tests_only = bool(triton) and what in ("test", "setup")
    requirements = "requirements-test.txt" if tests_only else "requirements-dev.txt"
    inputs = ["requirements.txt", "requirements-test.txt", "requirements-dev.txt", "pyproject.toml",
              "fa2/_version.py"]
    key = "\n".join([sys.version, f"FA2_TORCH={TORCH}", f"FA2_TRITON={triton or ''}", requirements,
                     *(f"{name} {hashlib.sha256((ROOT / name).read_bytes()).hexdigest()}" for name in inputs)])
    stamp = VENV / "fa2-setup.txt"                      # written when a set-up finishes
    if PY.exists() and stamp.exists() and stamp.read_text() == key:
        print(f"+ ({VENV.name} is set up from these requirements already: {stamp} says so)", flush=True)
        return
    if not PY.exists():
        sh(sys.executable, "-m", "venv", VENV)
    stamp.unlink(missing_ok=True)
    install = installer()
    if not has("torch"):
        # A CPU machine needs no CUDA build of several GB; a GPU machine keeps whatever torch it brings.
        sh(*install, TORCH)
    sh(*install, "-r", requirements, *([triton] if tests_only else []))
    with checkout_lock():
        sh(*install, "-e", ".")
    if triton and not tests_only:
        sh(*install, "--upgrade", triton)
    sh(PY, "-c", "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__)")
    stamp.write_text(key)


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
    with checkout_lock():                                   # the sdist is made in the checkout
        step("build", PY, "-m", "build", "--outdir", dist, ".")  # the sdist, then the wheel built from the sdist
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
    if what not in ("test", "book", "wheel", "setup"):
        print(__doc__)
        return 2
    setup(what)
    if what == "setup":
        return 0
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
