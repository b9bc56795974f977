"""The release: one version (fa2/_version.py) that pyproject, `fa2.__version__`, the installed metadata and the
changelog agree on; the release checks of tools/wheel_smoke.py (its contents rules and its smoke test, here
against the checkout; `python3 dev.py wheel` runs them on a built wheel in a fresh venv)."""
import importlib.util
import json
import re
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

import fa2

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("wheel_smoke", ROOT / "tools/wheel_smoke.py")
smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(smoke)


def test_version_is_written_once_and_pyproject_reads_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fa2._version.__version__"}
    assert fa2.__version__ == smoke.source_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", fa2.__version__)


def test_setuptools_builds_the_version_of_fa2():
    pyprojecttoml = pytest.importorskip("setuptools.config.pyprojecttoml")
    config = pyprojecttoml.read_configuration(ROOT / "pyproject.toml", expand=True)
    assert config["project"]["version"] == fa2.__version__


def test_installed_metadata_agrees_when_installed_from_this_checkout():
    """`pip install -e .` of this checkout (dev.py's) records the version it built; a stale one fails here."""
    mine = [d for d in metadata.distributions(name="fa2-triton")        # not a stray egg-info in the cwd
            if json.loads(d.read_text("direct_url.json") or "{}").get("url", "").rstrip("/") == ROOT.as_uri()]
    if not mine:
        pytest.skip("fa2-triton is not installed from this checkout")
    assert {d.version for d in mine} == {fa2.__version__}, "stale install: `python3 dev.py test` reinstalls it"


def test_changelog_starts_with_this_version():
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings and headings[0] == fa2.__version__, headings[:2]
    assert len(headings) == len(set(headings))


def test_readme_points_to_the_changelog_and_names_this_release():
    readme = (ROOT / "README.md").read_text()
    assert "CHANGELOG.md" in readme
    assert re.findall(r"Current release: \*\*(\S+)\*\*", readme) == [fa2.__version__]
    assert set(re.findall(r"fa2_triton-(\d[^-]*)-", readme)) <= {fa2.__version__}


# -- the contents rules of tools/wheel_smoke.py, on hand-made distributions ----------------------------


def _wheel(path, names, version=None):
    version = version or fa2.__version__
    info = f"fa2_triton-{version}.dist-info/"
    whl = path / f"fa2_triton-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for name in names:
            z.writestr(name, "")
        z.writestr(info + "METADATA", f"Metadata-Version: 2.4\nName: fa2-triton\nVersion: {version}\n\n")
        z.writestr(info + "licenses/LICENSE", "MIT")
    return whl


def test_wheel_rules_accept_the_package_and_nothing_else(tmp_path):
    shipped = sorted(smoke.shipped_files())
    assert "fa2/__init__.py" in shipped and "fa2/configs/NVIDIA_H200.json" in shipped
    assert smoke.wheel_problems(_wheel(tmp_path, shipped)) == []


def test_wheel_rules_name_what_is_missing_or_extra(tmp_path):
    names = [n for n in smoke.shipped_files() if not n.startswith("fa2/configs/")] + ["tests/test_api.py"]
    problems = smoke.wheel_problems(_wheel(tmp_path, names))
    assert "missing fa2/configs/NVIDIA_H200.json" in problems
    assert "should not ship tests/test_api.py" in problems
    problems = smoke.wheel_problems(_wheel(tmp_path, smoke.shipped_files(), version="0.0.1"))
    assert any("not version" in p for p in problems)


def test_sdist_rules_refuse_the_book_and_tests(tmp_path):
    top = f"fa2_triton-{fa2.__version__}/"
    sdist = tmp_path / f"fa2_triton-{fa2.__version__}.tar.gz"
    src = tmp_path / "src"
    names = [*smoke.shipped_files(), "pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE"]
    for name in names + ["book/01_online_softmax.ipynb"]:
        (src / top / name).parent.mkdir(parents=True, exist_ok=True)
        (src / top / name).write_text("")
    with tarfile.open(sdist, "w:gz") as t:
        t.add(src / top, arcname=top.rstrip("/"))
    assert smoke.sdist_problems(sdist) == ["should not ship book/01_online_softmax.ipynb"]


# -- the smoke test itself, on the checkout's fa2 ------------------------------------------------------


@pytest.mark.parametrize("check", [c for c in smoke.CHECKS if c is not smoke.check_installed],
                         ids=lambda c: c.__name__)
def test_smoke_checks_pass_on_the_checkout(check):
    assert check()


def test_smoke_installed_check_refuses_a_checkout():
    with pytest.raises(AssertionError, match="not from an installed copy|from a checkout"):
        smoke.check_installed()
