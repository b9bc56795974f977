"""The opening every chapter shares, made from the one repository URL in `_config.yml`.

Every `book/NN_*.ipynb` opens with

* an "Open in Colab" badge in its first markdown cell, opening that notebook from the repository;
* the setup cell, its first code cell: use `fa2` from the clone the notebook sits in, or install
  it from the repository (Colab, a fresh environment), then print where the kernels run.

Both are generated from `repository.url` and `repository.branch` in `_config.yml`, which the book's
repository button also reads, so the URL is written by hand in one place only.

    python tools/notebook_header.py           # rewrite the badge and the setup cell of every chapter
    python tools/notebook_header.py --check   # write nothing; exit 1 naming the chapters that differ
"""

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)$", re.MULTILINE)

SETUP = '''\
# NBVAL_IGNORE_OUTPUT
# Setup: use fa2 from this clone, or install it; then say where the kernels run.
import importlib.util, os, pathlib, subprocess, sys

REPO = "{url}"
here = pathlib.Path.cwd()
for root in (here, here.parent):  # in a clone (book/ or its root): use its own fa2
    if (root / "fa2" / "__init__.py").is_file():
        sys.path.insert(0, str(root))
        break
if importlib.util.find_spec("fa2") is None:  # Colab, or an environment without fa2
    print(f"installing fa2 from {{REPO}} ...")
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", f"git+{{REPO}}"],
                         capture_output=True, text=True,
                         env={{**os.environ, "GIT_TERMINAL_PROMPT": "0"}})
    if pip.returncode != 0:
        print(pip.stderr[-2000:])
        raise RuntimeError(f"could not install fa2 from {{REPO}}. Clone it, run "
                           "`pip install -e .` in the clone and open this notebook "
                           "from its book/ folder.")
    importlib.invalidate_caches()
import fa2.runtime as rt  # before triton: sets TRITON_INTERPRET=1 when there is no GPU
print(rt.describe())'''

SETUP_TAGS = ["hide-input"]      # the book folds the cell's code away and shows what it printed


def repository(root: Path = ROOT) -> tuple:
    """(url, branch) of the repository, from _config.yml."""
    config = yaml.safe_load((root / "_config.yml").read_text())
    repo = config["repository"]
    return repo["url"].rstrip("/"), repo.get("branch", "main")


def colab_url(url: str, branch: str, notebook: str) -> str:
    """The Colab address that opens `notebook` (a path in the repository) from GitHub."""
    owner_repo = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(\.git)?", url)
    if not owner_repo:
        raise ValueError(f"repository.url must be https://github.com/OWNER/NAME, got {url}")
    return f"https://colab.research.google.com/github/{owner_repo[1]}/blob/{branch}/{notebook}"


def badge(url: str, branch: str, notebook: str) -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({colab_url(url, branch, notebook)})"


def _source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _lines(text: str) -> list:
    return text.splitlines(keepends=True)


def apply(nb: dict, notebook: str, url: str, branch: str) -> dict:
    """Put the badge and the setup cell into a notebook (a dict as in the .ipynb file)."""
    cells = nb["cells"]
    intro = next(c for c in cells if c["cell_type"] == "markdown")
    text = _source(intro)
    line = badge(url, branch, notebook)
    if BADGE.search(text):
        text = BADGE.sub(lambda _: line, text, count=1)
    else:                                          # after the title line
        title, _, rest = text.partition("\n")
        text = f"{title}\n\n{line}\n\n{rest.lstrip()}".rstrip() + "\n"
    intro["source"] = _lines(text.rstrip("\n"))
    setup = next(c for c in cells if c["cell_type"] == "code")
    setup["source"] = _lines(SETUP.format(url=url))
    setup.setdefault("metadata", {})["tags"] = SETUP_TAGS
    return nb


def chapters(root: Path = ROOT) -> list:
    return sorted((root / "book").glob("[0-9][0-9]_*.ipynb"))


def _dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def stale(root: Path = ROOT) -> list:
    """Chapters whose badge or setup cell differ from what _config.yml says."""
    url, branch = repository(root)
    bad = []
    for path in chapters(root):
        nb = json.loads(path.read_text())
        want = apply(json.loads(path.read_text()), path.relative_to(root).as_posix(), url, branch)
        if nb != want:
            bad.append(path)
    return bad


def write(root: Path = ROOT) -> list:
    url, branch = repository(root)
    changed = []
    for path in stale(root):
        nb = apply(json.loads(path.read_text()), path.relative_to(root).as_posix(), url, branch)
        path.write_text(_dump(nb))
        changed.append(path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a chapter differs")
    parser.add_argument("--root", type=Path, default=ROOT, help="project root")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    if args.check:
        bad = stale(root)
        for p in bad:
            print(f"stale: {p.relative_to(root)} (run `python tools/notebook_header.py`)",
                  file=sys.stderr)
        return 1 if bad else 0
    for p in write(root):
        print(f"wrote {p.relative_to(root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
