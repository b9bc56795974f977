"""`pip install` ships every package under fa2/ (the wheel once lacked fa2/chapters, so `import fa2` failed)."""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python 3.11+")
def test_every_package_under_fa2_is_listed_in_pyproject():
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "fa2").rglob("__init__.py")}
    assert found <= listed, f"pyproject.toml [tool.setuptools] packages misses {sorted(found - listed)}"
