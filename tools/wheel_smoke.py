"""The release checks: what the built distributions hold, and a smoke test of an installed `fa2`.

    python tools/wheel_smoke.py --contents dist/   # the wheel and sdist in dist/ hold what they should
    python tools/wheel_smoke.py                    # smoke-test the fa2 this Python imports

`python3 dev.py wheel` runs both: it builds dist/ with `python -m build`, checks it, installs the wheel into a
fresh virtual environment and runs the smoke test there from a folder outside the checkout (so `import fa2`
is the installed copy), then does the same after `pip install git+file://<checkout>`.

The smoke test needs only what a user's install has (torch, triton, numpy; no pytest). On a machine without a
GPU the kernels run under the Triton interpreter on tiny shapes, checked against a float64 reference written
here, independently of `fa2.testing`. It ends with the line `smoke: N passed, M failed` and exits non-zero if
anything failed.
"""

import argparse
import ast
import json
import re
import subprocess
import sys
import tarfile
import time
import traceback
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST_NAME = "fa2_triton"                       # the distribution "fa2-triton", as file names spell it
SDIST_FORBIDDEN = ("tests/", "book/", "_build/", "gpu/", ".ci/", ".github/", "tools/", "bench-results/")


# -- what the distributions hold ----------------------------------------------------------------------


def source_version(root: Path = ROOT) -> str:
    """fa2/_version.py's __version__, read without importing fa2 (which would import torch)."""
    tree = ast.parse((root / "fa2" / "_version.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__version__" for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError("fa2/_version.py assigns no __version__")


def shipped_files(root: Path = ROOT) -> set:
    """The files under fa2/ that an install needs: every module and every config table (tracked by git
    when the checkout is a repository, so stray local files do not count)."""
    try:
        out = subprocess.run(["git", "ls-files", "fa2"], cwd=root, capture_output=True, text=True, check=True)
        files = out.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = [p.relative_to(root).as_posix() for p in (root / "fa2").rglob("*") if p.is_file()]
    return {f for f in files if f.endswith(".py") or re.fullmatch(r"fa2/configs/[^/]+\.json", f)}


def wheel_problems(wheel: Path, root: Path = ROOT) -> list:
    """Why the wheel is wrong: a missing module or table, anything beyond fa2/ and its metadata, a version
    or license that is not the checkout's. Empty when it is right."""
    version = source_version(root)
    info = f"{DIST_NAME}-{version}.dist-info/"
    problems = []
    if not wheel.name.startswith(f"{DIST_NAME}-{version}-"):
        problems.append(f"{wheel.name}: not version {version} (fa2/_version.py)")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(info + "METADATA").decode() if info + "METADATA" in names else ""
    for missing in sorted(shipped_files(root) - names):
        problems.append(f"missing {missing}")
    for extra in sorted(n for n in names if not (n.startswith(info) or n in shipped_files(root))):
        problems.append(f"should not ship {extra}")
    if f"\nVersion: {version}\n" not in metadata:
        problems.append(f"METADATA does not say Version: {version}")
    if info + "licenses/LICENSE" not in names:
        problems.append("no LICENSE in the metadata")
    return problems


def sdist_problems(sdist: Path, root: Path = ROOT) -> list:
    """Why the source distribution is wrong: a missing module or table, or the book, tests or CI in it."""
    version = source_version(root)
    top = f"{DIST_NAME}-{version}/"
    with tarfile.open(sdist) as t:
        names = {m.name + ("/" if m.isdir() else "") for m in t.getmembers()}
    inside = {n[len(top):] for n in names if n.startswith(top)}
    problems = [f"outside {top}: {n}" for n in sorted(names) if not n.startswith(top) and n != top.rstrip("/")]
    problems += [f"missing {f}" for f in sorted(shipped_files(root) - inside)]
    problems += [f"missing {f}" for f in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE") if f not in inside]
    files = sorted(n for n in inside if not n.endswith("/"))
    problems += [f"should not ship {n}" for n in files if n.startswith(SDIST_FORBIDDEN)]
    return problems


def check_contents(dist: Path, root: Path = ROOT) -> int:
    wheels, sdists = sorted(dist.glob("*.whl")), sorted(dist.glob("*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        print(f"{dist}: want one wheel and one sdist, found {[p.name for p in wheels + sdists]}")
        return 1
    bad = 0
    for path, problems in ((wheels[0], wheel_problems(wheels[0], root)), (sdists[0], sdist_problems(sdists[0], root))):
        for p in problems:
            print(f"{path.name}: {p}")
        bad += len(problems)
        if not problems:
            print(f"{path.name}: ok")
    return 1 if bad else 0


# -- the smoke test of an installed fa2 ----------------------------------------------------------------


def reference(q, k, v, causal=False, scale=None):
    """Attention in float64: (o, lse). GQA by repeating K/V heads; causal aligned bottom-right."""
    import torch

    q, k, v = (t.double() for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = (q @ k.transpose(-1, -2)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if causal:
        nq, nk = q.shape[-2], k.shape[-2]
        i = torch.arange(nq, device=s.device)[:, None]
        j = torch.arange(nk, device=s.device)[None, :]
        s = s.masked_fill(j > i + (nk - nq), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse[..., None]) @ v, lse


TOLERANCE = {"float16": 4e-3, "bfloat16": 3e-2}   # against float64, on outputs of magnitude below 1


def _close(name, got, want, dtype):
    import torch

    tol = TOLERANCE[str(dtype).removeprefix("torch.")]
    torch.testing.assert_close(got.double().cpu(), want.cpu(), atol=tol, rtol=tol, msg=lambda m: f"{name}: {m}")


def _inputs(shape_q, shape_kv, dtype, device, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    q = torch.randn(shape_q, generator=g).to(device, dtype)
    k = torch.randn(shape_kv, generator=g).to(device, dtype)
    v = torch.randn(shape_kv, generator=g).to(device, dtype)
    return q, k, v


def check_installed():
    """fa2 comes from an install (not a checkout on sys.path), and its version is the metadata's."""
    from importlib import metadata

    import fa2

    where = Path(fa2.__file__).resolve().parent
    assert "site-packages" in where.parts, f"fa2 imported from {where}, not from an installed copy"
    assert not (where.parent / "pyproject.toml").exists(), f"fa2 imported from a checkout: {where}"
    installed = metadata.version("fa2-triton")
    assert fa2.__version__ == installed, f"fa2.__version__ {fa2.__version__} != installed {installed}"
    return f"fa2 {fa2.__version__} from {where}"


def check_config_tables():
    """Every shipped table is installed, parses, and is what the config lookup reads for its GPU."""
    from importlib import resources

    from fa2.chapters.autotune import ConfigTable
    from fa2.varlen_configs import VarlenTable

    tables = sorted(p for p in (resources.files("fa2") / "configs").iterdir() if p.name.endswith(".json"))
    assert tables, "no config tables installed under fa2/configs/"
    for path in tables:
        data = json.loads(path.read_text())
        assert data["configs"], f"{path.name}: empty"
        if path.name.endswith(".gluon.json"):     # chapter 12's dispatch table, read by fa2.gluon.dispatch
            from fa2.gluon import dispatch
            assert dispatch.shipped_families(data["device"]) == data["families"], f"{path.name}: not read"
            continue
        # chapter 10's kernel has tables of its own (<GPU>.varlen.json), read by its own lookup
        table = VarlenTable if path.name.endswith(".varlen.json") else ConfigTable
        assert table(data["device"]).shipped == data["configs"], f"{path.name}: the lookup does not read it"
    return ", ".join(f"{p.name} ({len(json.loads(p.read_text())['configs'])} keys)" for p in tables)


def check_attention():
    """fa2.attention: fp16 and bf16, GQA, causal with Nq < Nk, a non-power-of-two head dim, the LSE."""
    import torch

    import fa2

    dev = fa2.runtime.DEVICE
    for dtype in (torch.float16, torch.bfloat16):
        for nq, nk, d, causal in ((64, 64, 64, False), (40, 72, 40, True)):
            q, k, v = _inputs((1, 4, nq, d), (1, 2, nk, d), dtype, dev)
            o, lse = fa2.attention(q, k, v, causal=causal, return_lse=True)
            want_o, want_lse = reference(q, k, v, causal)
            assert o.shape == q.shape and o.dtype == dtype, (o.shape, o.dtype)
            _close(f"o {dtype} Nq={nq} Nk={nk} D={d} causal={causal}", o, want_o, dtype)
            torch.testing.assert_close(lse.double().cpu(), want_lse.cpu(), atol=1e-3, rtol=1e-3)
    return "fp16, bf16; GQA 4:2; causal 40x72; D=64, 40"


def check_decode():
    """fa2.decode over a contiguous cache with per-row lengths, and over the same cache paged."""
    import torch

    import fa2

    dev = fa2.runtime.DEVICE
    dtype = torch.float16
    B, Hq, Hkv, N, D, page = 2, 4, 2, 64, 64, 16
    q, k, v = _inputs((B, Hq, 1, D), (B, Hkv, N, D), dtype, dev, seed=1)
    seqlens = torch.tensor([37, N], dtype=torch.int32, device=dev)
    want = torch.cat([reference(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n])[0]
                      for b, n in enumerate(seqlens.tolist())])
    _close("decode", fa2.decode(q, k, v, cache_seqlens=seqlens), want, dtype)

    pages_per_row = N // page                       # pages shuffled across the pool, as an allocator would
    order = torch.randperm(B * pages_per_row, generator=torch.Generator().manual_seed(2))
    block_table = order.view(B, pages_per_row).to(device=dev, dtype=torch.int32)
    k_pages = torch.empty(B * pages_per_row, page, Hkv, D, dtype=dtype, device=dev)
    v_pages = torch.empty_like(k_pages)
    for b in range(B):
        for p in range(pages_per_row):
            rows = slice(p * page, (p + 1) * page)
            k_pages[block_table[b, p]] = k[b, :, rows].transpose(0, 1)
            v_pages[block_table[b, p]] = v[b, :, rows].transpose(0, 1)
    got = fa2.decode(q, k_pages, v_pages, cache_seqlens=seqlens, block_table=block_table)
    _close("decode (paged)", got, want, dtype)
    return f"fp16, GQA 4:2, lengths {seqlens.tolist()}, contiguous and {page}-row pages"


def check_bad_input():
    """Bad input raises, naming the argument, instead of computing garbage."""
    import torch

    import fa2

    q, k, v = _inputs((1, 2, 16, 32), (1, 2, 16, 32), torch.float16, fa2.runtime.DEVICE)
    for bad, args in (("dtype", (q.float(), k, v)), ("shape", (q, k[..., :16], v))):
        try:
            fa2.attention(*args)
        except (TypeError, ValueError) as e:
            assert str(e), f"{bad}: empty message"
        else:
            raise AssertionError(f"a wrong {bad} did not raise")
    return "wrong dtype and head dim raise"


CHECKS = [check_installed, check_config_tables, check_attention, check_decode, check_bad_input]


def smoke() -> int:
    import fa2

    print(f"smoke test of the installed fa2: {fa2.runtime.describe()}", flush=True)
    failed = 0
    for check in CHECKS:
        start = time.perf_counter()
        try:
            what = check()
        except Exception:
            failed += 1
            print(f"FAIL {check.__name__}\n{traceback.format_exc()}", flush=True)
        else:
            print(f"ok   {check.__name__} ({time.perf_counter() - start:.1f} s): {what}", flush=True)
    print(f"smoke: {len(CHECKS) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contents", type=Path, metavar="DIST",
                        help="check the wheel and sdist in this folder instead of smoke-testing")
    args = parser.parse_args(argv)
    return check_contents(args.contents) if args.contents else smoke()


if __name__ == "__main__":
    sys.exit(main())
