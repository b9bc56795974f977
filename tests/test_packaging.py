"""A plain `pip install` (Colab's, not an editable one) ships every module of the package."""
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {p.parent.relative_to(ROOT).as_posix().replace("/", ".")
               for p in (ROOT / "fa2").rglob("__init__.py")}
    assert on_disk <= listed, f"add {sorted(on_disk - listed)} to [tool.setuptools] packages"
