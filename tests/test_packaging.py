"""A plain `pip install` (Colab's, not an editable one) ships every module of the package."""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
setuptools = pytest.importorskip("setuptools")

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_found_by_pyproject():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    found = set(setuptools.find_packages(where=str(ROOT), include=find["include"]))
    on_disk = {p.parent.relative_to(ROOT).as_posix().replace("/", ".")
               for p in (ROOT / "fa2").rglob("__init__.py")}
    assert on_disk <= found, f"{sorted(on_disk - found)} would not ship: fix [tool.setuptools.packages.find]"
    assert all(name == "fa2" or name.startswith("fa2.") for name in found), found
