"""The GPU scripts that time mutants of the book's modules (gpu/*.py calling fa2.testing.mutant) still build them:
a mutant names lines of a chapter's source, so an edit to the chapter can leave a script that only fails on the GPU
machine, where time is scarce. Importing each script builds its mutants (no kernel runs)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "gpu").glob("*.py") if "mutant(" in p.read_text())


def test_there_are_such_scripts():
    assert {p.name for p in SCRIPTS} >= {"decode_page_tile.py", "decode_strided.py", "decode_chunked.py"}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_gpu_script_builds_its_mutants(script):
    done = subprocess.run([sys.executable, "-c", f"import {script.stem}"], cwd=script.parent, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
