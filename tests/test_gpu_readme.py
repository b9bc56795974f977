"""gpu/README.md is the index of the scripts run by hand on a GPU machine: every file in gpu/ must be named there as
`name` (so a new script cannot go unlisted), and every script name the README gives must exist in gpu/ (so a
renamed or deleted one cannot leave a stale row). Paths of other folders (tests/test_varlen.py,
fa2/gluon/candidates.py) are not script names; gpu/name.sh is."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GPU = ROOT / "gpu"

# A script name: word characters, then .sh or .py, not inside a path of another folder ("gpu/" is allowed).
SCRIPT_NAME = re.compile(r"(?<![\w/.-])(?:gpu/)?(\w+\.(?:sh|py))\b")


def gpu_files():
    return sorted(p.name for p in GPU.iterdir() if p.is_file() and p.name != "README.md")


def problems(readme, files):
    """(files never named as `name`, script names in the text that are not files) for README text `readme`."""
    missing = [name for name in files if f"`{name}`" not in readme]
    unknown = sorted(set(SCRIPT_NAME.findall(readme)) - set(files))
    return missing, unknown


def test_there_are_gpu_scripts():
    files = gpu_files()
    assert len(files) > 50 and {"checks.sh", "book.sh", "sweeps.sh", "money_ab.py"} <= set(files)


def test_every_gpu_script_is_in_the_readme_and_no_other():
    missing, unknown = problems((GPU / "README.md").read_text(), gpu_files())
    assert not missing, f"gpu/ files not named as `name` in gpu/README.md: {missing}"
    assert not unknown, f"gpu/README.md names scripts that gpu/ does not have: {unknown}"


def test_the_check_catches_a_missing_and_an_unknown_script():
    readme = "Run `checks.sh`, then `gpu/gone.sh`; `book.sh [chapter]` and tests/test_varlen.py are not enough."
    missing, unknown = problems(readme, ["book.sh", "checks.sh"])
    assert missing == ["book.sh"]            # named only with its arguments inside the backticks
    assert unknown == ["gone.sh"]            # tests/test_varlen.py is another folder's file, not a script name
