"""The book's Sphinx extensions, without building the book (tests/test_book_html.py checks the build)."""
import importlib.util
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parent.parent / "book" / "_ext"
pytest.importorskip("sphinx.ext")             # the book's tools (requirements-dev.txt); a GPU image may lack them
pytest.importorskip("docutils")


def _load(name):
    spec = importlib.util.spec_from_file_location(name, EXT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_marker_lines_are_dropped_and_code_is_kept():
    strip = _load("hide_markers").strip_markers
    cell = "# NBVAL_IGNORE_OUTPUT\n#| export\n#| default_exp reference\n\nimport math\n#| not a marker\nx = 1"
    assert strip(cell) == "import math\n#| not a marker\nx = 1"
    assert strip("#| export kv_loop\ndef f():\n    return 1  # NBVAL_SKIP stays in a comment") == \
        "def f():\n    return 1  # NBVAL_SKIP stays in a comment"
    assert strip("print(1)") == "print(1)"


def test_only_files_under_results_are_linked():
    named = _load("result_links").NAMED
    assert named.fullmatch("results/money.csv") and named.fullmatch("book/results/ladder.png")
    assert not named.fullmatch("fa2/plan.py") and not named.fullmatch("results/")
