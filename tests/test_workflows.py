"""Ready to host: the GitHub Actions workflows pass actionlint and run what the README says, and every
address of the repository (README badges, pyproject's links, the book's Pages site) is the one in _config.yml."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
_spec = importlib.util.spec_from_file_location("notebook_header", ROOT / "tools/notebook_header.py")
header = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(header)


def _workflow(name):
    wf = yaml.safe_load((WORKFLOWS / name).read_text())
    wf["on"] = wf.pop(True, wf.get("on"))          # YAML 1.1 reads the key `on` as True
    return wf


def _steps(wf):
    return [step for job in wf["jobs"].values() for step in job.get("steps", [])]


def _path_with_venv():
    """PATH with this Python's bin folder first: actionlint and shellcheck are installed there."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


ACTIONLINT = shutil.which("actionlint", path=_path_with_venv())
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint not installed (requirements-dev.txt has it for x86-64 Linux)")


def _actionlint(*files):
    return subprocess.run([ACTIONLINT, *map(str, files)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PATH": _path_with_venv()})


def test_the_two_workflows_exist():
    assert sorted(p.name for p in WORKFLOWS.glob("*.y*ml")) == ["ci.yml", "pages.yml"]


@needs_actionlint
def test_workflows_pass_actionlint():
    result = _actionlint(*sorted(WORKFLOWS.glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_actionlint
def test_actionlint_reports_a_broken_workflow(tmp_path):
    """The lint above can fail: an unknown context property and unquoted shell are both reported."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
                   "      - run: echo ${{ github.no_such_thing }}\n")
    result = _actionlint(bad)
    assert result.returncode == 1 and "no_such_thing" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("name", ["ci.yml", "pages.yml"])
def test_workflow_permissions_concurrency_timeouts(name):
    wf = _workflow(name)
    assert wf["permissions"] == {"contents": "read"}, "least privilege at the top; a job asks for more"
    assert "group" in wf["concurrency"]
    for job_name, job in wf["jobs"].items():
        assert "timeout-minutes" in job, f"{name}: job {job_name} has no timeout"


def test_ci_workflow_runs_ci_script_on_pushes_and_pull_requests():
    wf = _workflow("ci.yml")
    assert {"push", "pull_request"} <= set(wf["on"])
    assert [s["run"] for s in _steps(wf) if "run" in s] == ["bash .ci/run"]
    ci = (ROOT / ".ci" / "run").read_text()
    for command in ("python3 dev.py test", "python3 dev.py book", "python3 dev.py wheel"):
        assert command in ci, f".ci/run does not run `{command}`"


def test_pages_workflow_builds_the_book_as_the_readme_says_and_deploys_it():
    wf = _workflow("pages.yml")
    assert "python3 dev.py book" in (ROOT / "README.md").read_text()
    steps = _steps(wf)
    assert "python3 dev.py book" in [s.get("run") for s in steps]
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-pages-artifact@"))
    assert upload["with"]["path"] == "_build/html"             # where jupyter-book writes the site
    deploy = wf["jobs"]["deploy"]
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]
    assert set(wf["on"]) == {"push", "workflow_dispatch"} and wf["on"]["push"]["branches"] == ["main"]


# -- one repository URL ---------------------------------------------------------------------------------

GITHUB = re.compile(r"github\.com/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+?)(?:\.git)?(?=[^A-Za-z0-9_-]|$)")
PAGES = re.compile(r"([A-Za-z0-9_-]+)\.github\.io/([A-Za-z0-9_.-]+)")
EXTERNAL = set()   # other projects' repositories the text may link to, as "owner/name"
NOT_SCANNED = ("tests/", "book/_static/", "tools/notebook_header.py")   # fixtures, vendored files, the template


def _text_files():
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        files = [ROOT / f for f in out.splitlines()]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in ROOT.rglob("*") if p.is_file() and ".git" not in p.parts]
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(NOT_SCANNED) or not path.is_file():
            continue
        try:
            yield rel, path.read_text()
        except UnicodeDecodeError:
            continue


def test_every_address_of_the_repository_is_the_one_in_config():
    url, _ = header.repository()
    owner, name = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", url).groups()
    wrong = []
    for rel, text in _text_files():
        for m in GITHUB.finditer(text):
            if f"{m[1]}/{m[2]}" not in ({f"{owner}/{name}"} | EXTERNAL):
                wrong.append(f"{rel}: github.com/{m[1]}/{m[2]}")
        for m in PAGES.finditer(text):
            if (m[1], m[2]) != (owner, name):
                wrong.append(f"{rel}: {m[0]} (the site is {owner}.github.io/{name})")
    assert not wrong, (f"_config.yml's repository.url is {url}; these differ (`python tools/notebook_header.py` "
                       "rewrites the chapters; a link to another project goes into EXTERNAL in this test):\n"
                       + "\n".join(wrong))


def test_workflows_name_no_repository():
    """The workflows work in any fork: they take the repository from GitHub's context, never from text."""
    for path in WORKFLOWS.glob("*.yml"):
        assert not GITHUB.search(path.read_text()), path.name


def test_readme_links_the_book_site_and_the_ci_badge():
    url, _ = header.repository()
    owner, name = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+)", url).groups()
    readme = (ROOT / "README.md").read_text()
    assert f"https://{owner}.github.io/{name}/" in readme
    assert f"{url}/actions/workflows/ci.yml/badge.svg" in readme


def test_every_test_module_says_which_tritons_run_it():
    """Each tests/test_*.py is in exactly one of conftest's KERNEL_MODULES (CI runs it on every Triton) and
    PINNED_ONLY (the pinned Triton only), so a new module is not left out of the other Tritons' runs unnoticed;
    .ci/run passes --kernels-only to those runs."""
    import conftest
    modules = {path.stem for path in (ROOT / "tests").glob("test_*.py")}
    assert not conftest.KERNEL_MODULES & conftest.PINNED_ONLY
    listed = conftest.KERNEL_MODULES | conftest.PINNED_ONLY
    assert listed == modules, (modules - listed, listed - modules)
    ci = (ROOT / ".ci" / "run").read_text()
    assert ci.count("python3 dev.py test tests --kernels-only") == 2, "the oldest and newest Triton runs"


def test_kernels_only_keeps_the_first_and_last_case_of_each_test():
    """--kernels-only (the oldest and newest Tritons) runs every test function of KERNEL_MODULES, a parametrized
    one at its first and last case (COMPAT_CASES), and reports the others deselected;
    without the option every case runs."""
    from types import SimpleNamespace

    import conftest
    assert conftest.COMPAT_CASES == 2
    assert [conftest.compat_cases(n) for n in (1, 2, 3, 4, 7)] == [[0], [0, 1], [0, 2], [0, 3], [0, 6]]
    items = [SimpleNamespace(path="tests/test_a.py", originalname="test_x", name=f"test_x[{i}]") for i in range(7)]
    items += [SimpleNamespace(path="tests/test_b.py", originalname="test_x", name="test_x[0]"),
              SimpleNamespace(path="tests/test_a.py", originalname="test_y", name="test_y")]
    for kernels_only in (False, True):
        deselected = []
        config = SimpleNamespace(getoption=lambda name: kernels_only,
                                 hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
        run = list(items)
        conftest.pytest_collection_modifyitems(config, run)
        assert len(run) + len(deselected) == len(items) and not set(map(id, run)) & set(map(id, deselected))
        expected = ["test_x[0]", "test_x[6]", "test_x[0]", "test_y"] if kernels_only else \
            [item.name for item in items]
        assert [item.name for item in run] == expected



def test_uv_gets_pips_indexes_find_links_and_constraints(tmp_path):
    """dev.py installs with uv, which reads no pip configuration: uv_options turns `pip config list` into uv's
    options -- each existing location once, missing local ones left out (pip ignores them), the environment's
    index URL over a file's."""
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    wheels, constraints = tmp_path / "wheels", tmp_path / "constraints.txt"
    wheels.mkdir()
    constraints.write_text("torch<=9\n")
    listed = "\n".join([
        f"global.extra-index-url='file://{tmp_path}/missing https://download.pytorch.org/whl/cpu'",
        ":env:.extra-index-url='https://download.pytorch.org/whl/cpu'",
        f":env:.find-links='{wheels}'", f"global.find-links='{wheels}'",
        f"global.constraint='{constraints}'",
        ":env:.index-url='https://mirror.example/simple'", "global.index-url='https://pypi.org/simple'",
        ":env:.default-timeout='180'"])
    assert dev.uv_options(listed) == [
        "--extra-index-url", "https://download.pytorch.org/whl/cpu", "--find-links", str(wheels),
        "--constraint", str(constraints), "--index-url", "https://mirror.example/simple"]
    assert dev.uv_options("global.index-url='https://pypi.org/simple'") == ["--index-url", "https://pypi.org/simple"]
    assert dev.uv_options("") == []
