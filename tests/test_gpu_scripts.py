"""The GPU scripts that time mutants of the book's modules (gpu/*.py calling fa2.testing.mutant) still build them:
a mutant names lines of a chapter's source, so an edit to the chapter can leave a script that only fails on the GPU
machine, where time is scarce. Importing each script builds its mutants (no kernel runs). All of them are imported
in one subprocess (one start of torch and Triton instead of one a script), each on its own, so that every script
that fails is named with its error."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "gpu").glob("*.py") if "mutant(" in p.read_text())

# Run in the scripts' folder: imports each named module and prints {name: the end of its traceback} of those that
# raised, as JSON on the last line.
IMPORT_EACH = r"""
import importlib, json, sys, traceback
sys.path.insert(0, ".")
failed = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc()[-1500:]
print(json.dumps(failed))
"""


def import_each(folder, names):
    done = subprocess.run([sys.executable, "-c", IMPORT_EACH, *names], cwd=folder, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_there_are_such_scripts():
    assert {p.name for p in SCRIPTS} >= {"decode_page_tile.py", "decode_strided.py", "decode_chunked.py"}


def test_every_gpu_script_builds_its_mutants():
    failed = import_each(ROOT / "gpu", [p.stem for p in SCRIPTS])
    assert not failed, "\n\n".join(f"{name}:\n{error}" for name, error in failed.items())


def test_a_script_whose_mutant_names_a_missing_line_is_named(tmp_path):
    (tmp_path / "stale.py").write_text("from fa2.chapters import flash_decoding\nfrom fa2.testing import mutant\n"
                                       "M = mutant(flash_decoding, {'a line no chapter has': ''})\n")
    (tmp_path / "fine.py").write_text("X = 1\n")
    failed = import_each(tmp_path, ["fine", "stale"])
    assert list(failed) == ["stale"] and "a line no chapter has" in failed["stale"]
