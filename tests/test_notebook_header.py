"""Every chapter opens with the badge and setup cell made from _config.yml's one repository URL."""
import importlib.util
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("notebook_header", ROOT / "tools/notebook_header.py")
header = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(header)


def _check(root):
    return subprocess.run([sys.executable, str(ROOT / "tools/notebook_header.py"), "--check",
                           "--root", str(root)], capture_output=True, text=True)


def test_every_chapter_has_the_badge_and_setup_cell_of_config_url():
    assert header.stale() == [], "run `python tools/notebook_header.py`"
    url, branch = header.repository()
    for path in header.chapters():
        cells = json.loads(path.read_text())["cells"]
        notebook = path.relative_to(ROOT).as_posix()
        assert header.colab_url(url, branch, notebook) in "".join(cells[0]["source"])
        setup = next(c for c in cells if c["cell_type"] == "code")
        assert f'REPO = "{url}"' in "".join(setup["source"])


def test_changing_the_url_in_config_makes_the_check_fail(tmp_path):
    shutil.copytree(ROOT / "book", tmp_path / "book", ignore=shutil.ignore_patterns("results"))
    config = (ROOT / "_config.yml").read_text()
    (tmp_path / "_config.yml").write_text(config)
    assert _check(tmp_path).returncode == 0
    (tmp_path / "_config.yml").write_text(config.replace("fa2-book/fa2-triton", "someone/fork"))
    result = _check(tmp_path)
    assert result.returncode == 1 and "01_online_softmax.ipynb" in result.stderr
    header.write(tmp_path)
    assert _check(tmp_path).returncode == 0
    assert "github/someone/fork/blob/" in (tmp_path / "book/01_online_softmax.ipynb").read_text()


def _run_setup(tmp_path, monkeypatch, importable, pip_ok=True):
    """Run the setup cell's code with find_spec and pip faked; return the pip calls it made."""
    calls = []
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (real_find_spec(name) if importable else None)
                        if name == "fa2" else real_find_spec(name, *a))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd)
                        or types.SimpleNamespace(returncode=0 if pip_ok else 1, stderr="no repo"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.chdir(tmp_path)
    exec(header.SETUP.format(url="https://github.com/o/r"), {"__name__": "setup_cell"})
    return calls


def test_setup_cell_installs_nothing_when_fa2_is_importable(tmp_path, monkeypatch):
    assert _run_setup(tmp_path, monkeypatch, importable=True) == []


def test_setup_cell_uses_the_clone_it_runs_in(tmp_path, monkeypatch):
    (tmp_path / "fa2").mkdir()
    (tmp_path / "fa2" / "__init__.py").write_text("")
    (tmp_path / "book").mkdir()
    assert _run_setup(tmp_path / "book", monkeypatch, importable=True) == []
    assert sys.path[0] == str(tmp_path)


def test_setup_cell_installs_from_the_url_and_says_so_when_it_cannot(tmp_path, monkeypatch):
    calls = _run_setup(tmp_path, monkeypatch, importable=False)
    assert calls and calls[0][-1] == "git+https://github.com/o/r"
    with pytest.raises(RuntimeError, match="could not install fa2 from https://github.com/o/r"):
        _run_setup(tmp_path, monkeypatch, importable=False, pip_ok=False)
