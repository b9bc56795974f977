"""Chapter 10's kernel configs: the one key function, pruning, the table's round trip from the tuner to the lookup,
the fallback, and launch_config on a pretend GPU (CPU only: torch.cuda is faked)."""
import json

import pytest
import torch

import fa2
from fa2 import runtime, tune_varlen, varlen_configs as vc
from fa2.chapters import autotune
from fa2.chapters.varlen import DEFAULT_CONFIG

from conftest import requires_gpu

H200_SMEM = 227 * 1024
CFG_A = dict(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=4)
CFG_B = dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)


@pytest.fixture
def pretend_gpu(monkeypatch, tmp_path):
    """A GPU named 'Pretend GPU' whose shipped tables live in tmp_path/shipped, its user cache in tmp_path/cache."""
    if runtime.DEVICE == "cuda":
        pytest.skip("simulates a GPU on the CPU")
    monkeypatch.setattr(runtime, "INTERPRET", False)
    monkeypatch.setattr(vc, "device_name", lambda device: "Pretend GPU")
    monkeypatch.setattr(vc, "SHIPPED_DIR", tmp_path / "shipped")
    monkeypatch.setenv("FA2_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "shipped").mkdir()
    vc.forget()
    yield tmp_path
    vc.forget()


def ship(folder, configs, name="Pretend GPU", where="shipped"):
    """Write a table the way the tuner does (fa2.tune.new_document, then the configs), as JSON."""
    from fa2.tune import new_document
    document = new_document({}, name, "varlen", ["--kernel", "varlen"])
    document["configs"].update(configs)
    document["candidates"] = {key: [dict(cfg=cfg, ok=True, rel_err=1e-3, ms=float("inf"))]
                              for key, cfg in configs.items()}
    (folder / where).mkdir(exist_ok=True)
    (folder / where / vc.table_file_name(name)).write_text(json.dumps(document, indent=1, sort_keys=True))


# ------------------------------------------------------------------------------------------------ the key

@pytest.mark.parametrize("causal, window, max_q, max_k, key", [
    (True, None, 3890, 3890, "varlen/D128/bf16/causal/q4096/k4096"),
    (False, None, 100, 5000, "varlen/D128/bf16/full/q128/k8192"),
    (True, (4096, 0), 32768, 32768, "varlen/D128/bf16/window/q32768/k4096"),
    (True, (4096, -1), 32768, 32768, "varlen/D128/bf16/window/q32768/k4096"),    # causal sets right = 0
    (True, (-1, -1), 2048, 2048, "varlen/D128/bf16/causal/q2048/k2048"),         # (-1, -1): no window
    (True, (-1, 0), 2048, 2048, "varlen/D128/bf16/causal/q2048/k2048"),          # causal by another name
    (False, (-1, 7), 2048, 2048, "varlen/D128/bf16/window/q2048/k2048"),         # one unbounded side
    (False, (100, 28), 8192, 300, "varlen/D128/bf16/window/q8192/k128"),         # the window's width, >= 128
    (False, (5000, 5000), 700, 700, "varlen/D128/bf16/window/q1024/k1024"),      # never past max_seqlen_k
    (True, None, 0, 0, "varlen/D128/bf16/causal/q128/k128"),
])
def test_tuning_key(causal, window, max_q, max_k, key):
    assert vc.tuning_key(128, torch.bfloat16, causal, window, max_q, max_k) == key
    assert vc.parse_key(key)[0] == key.rsplit("/", 2)[0]


def test_key_width_is_the_kernels_power_of_two_and_dtype_is_checked():
    """The kernel runs one power-of-two tile (96 runs 128 columns here, unlike chapter 6's 64 + 32)."""
    assert vc.tuning_key(96, torch.float16, False, None, 512, 512) == "varlen/D128/fp16/full/q512/k512"
    assert vc.tuning_key(8, torch.float16, False, None, 512, 512).startswith("varlen/D16/")
    with pytest.raises(TypeError, match="fp16 or bf16"):
        vc.tuning_key(64, torch.float32, False, None, 512, 512)
    for bad in ("fast/D128/bf16/causal/q512/k512/w4", "varlen/D128/bf16/sliding/q512/k512", "varlen/x"):
        with pytest.raises(ValueError):
            vc.parse_key(bad)


def test_the_lookup_finds_what_the_tuner_writes(pretend_gpu, monkeypatch):
    """Every key the tuner writes (its cases, through tune_varlen.problem_key) is the key the public API's calls
    of the same problems look up: fa2.attention_varlen on the packed batch, fa2.attention(window=) on (B, H, N, D).
    The two share vc.tuning_key; this catches a caller that passes it something else (a hand-built key drifted
    from the table's format once already)."""
    problems = [p for case_set in tune_varlen.CASES.values() for p in case_set]
    configs = {tune_varlen.problem_key(p): dict(BLOCK_M=64, BLOCK_N=16 << i, num_warps=4, num_stages=2)
               for i, p in enumerate(problems)}
    assert len(configs) == len(problems)                     # one key per case
    ship(pretend_gpu, configs)
    seen = []
    from fa2 import validate, varlen as product
    monkeypatch.setattr(validate, "check_device", lambda who, q: None)   # CPU tensors on the pretend GPU
    monkeypatch.setattr(product, "attention_varlen_forward", lambda *a: seen.append(a[-1]) or (a[0], None))
    monkeypatch.setattr(product, "attention_window_forward", lambda *a: seen.append(a[-1]) or (a[0], None))
    for problem in problems:
        D, dtype, n = problem.D, torch.bfloat16, max(problem.lengths)
        if problem.sweep == "varlen":                        # tiny tensors: the key depends on max_seqlen only
            q = torch.zeros(3, problem.Hq, D, dtype=dtype)
            k = torch.zeros(3, problem.Hkv, D, dtype=dtype)
            cu = torch.tensor([0, 3], dtype=torch.int32)
            fa2.attention_varlen(q, k, k, cu, cu, n, n, causal=problem.causal, window=problem.window)
        else:                                                # (B, H, N, D) views of one row, N as the problem's
            q = torch.zeros(1, problem.Hq, 1, D, dtype=dtype).expand(len(problem.lengths), -1, n, -1)
            fa2.attention(q, q, q, causal=problem.causal, window=problem.window)
        assert seen.pop() == configs[tune_varlen.problem_key(problem)], problem.name()


# ------------------------------------------------------------------------------------------------ pruning

def test_candidates_are_pruned_by_chapter_6s_rules():
    kept = vc.candidates(128, H200_SMEM)
    assert len(vc.CANDIDATES) == 36 and 0 < len(kept) < 36
    assert DEFAULT_CONFIG in kept                            # the tuner times the fixed config too
    assert vc.WIDE_CONFIG in vc.candidates(256, H200_SMEM)
    for cfg in kept:                                         # chapter 6's shared-memory rule at 128 columns
        assert 2 * 128 * (cfg["BLOCK_M"] + 2 * cfg["BLOCK_N"] * cfg["num_stages"]) <= H200_SMEM
    assert dict(BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=2) not in kept     # the score tile spills
    assert dict(BLOCK_M=64, BLOCK_N=128, num_warps=4, num_stages=4) not in kept      # 272 KiB of tiles
    # 256 columns: a 128-row accumulator over 4 warps would need 256 registers a thread
    assert all(c["BLOCK_M"] == 64 or c["num_warps"] == 8 for c in vc.candidates(256, H200_SMEM))
    # the width is the kernel's one power of two: 96 prunes as 128 does
    assert vc.candidates(96, H200_SMEM) == kept
    assert len(vc.candidates(128, 99 * 1024)) < len(kept)   # a GPU with less shared memory keeps fewer


# ------------------------------------------------------------------------------------------------ the table

def test_table_round_trip_and_nearest(pretend_gpu):
    ship(pretend_gpu, {"varlen/D128/bf16/causal/q4096/k4096": CFG_A, "varlen/D128/bf16/window/q32768/k4096": CFG_B,
                       "varlen/D128/bf16/window/q32768/k1024": CFG_A})
    table = vc.VarlenTable("Pretend GPU")
    assert table.shipped_path == pretend_gpu / "shipped" / "Pretend_GPU.varlen.json"
    assert table.lookup("varlen/D128/bf16/causal/q4096/k4096") == CFG_A
    assert table.lookup("varlen/D128/bf16/causal/q2048/k2048") == CFG_A           # nearest of its family
    assert table.lookup("varlen/D128/bf16/window/q32768/k2048") == CFG_A          # 1024 before 4096 (sorted)
    assert table.lookup("varlen/D128/bf16/window/q16384/k8192") == CFG_B
    for other in ("varlen/D128/fp16/causal/q4096/k4096", "varlen/D128/bf16/full/q4096/k4096",
                  "varlen/D64/bf16/causal/q4096/k4096"):
        assert table.lookup(other) is None                                         # no family: the fallback
    table.lookup("varlen/D128/bf16/causal/q4096/k4096")["BLOCK_M"] = 7               # a copy
    assert table.shipped["varlen/D128/bf16/causal/q4096/k4096"] == CFG_A


def test_user_cache_comes_before_the_shipped_table(pretend_gpu):
    key = "varlen/D128/bf16/causal/q4096/k4096"
    ship(pretend_gpu, {key: CFG_A})
    ship(pretend_gpu, {key: CFG_B}, where="cache")
    assert vc.VarlenTable("Pretend GPU").lookup(key) == CFG_B


def test_broken_tables_and_entries_are_not_read(pretend_gpu):
    path = pretend_gpu / "shipped" / vc.table_file_name("Pretend GPU")
    path.write_text("{not json")
    assert vc.VarlenTable("Pretend GPU").shipped == {}
    path.write_text(json.dumps({"configs": {
        "varlen/D128/bf16/causal/q4096/k4096": dict(CFG_A, error="OutOfResources"),     # extra field: dropped
        "varlen/D128/bf16/full/q4096/k4096": dict(BLOCK_M=96, BLOCK_N=64, num_warps=4, num_stages=2),
        "varlen/D128/bf16/window/q4096/k4096": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4),
        "fast/D128/bf16/causal/q4096/k4096/w4": CFG_A}}))
    assert vc.VarlenTable("Pretend GPU").shipped == {"varlen/D128/bf16/causal/q4096/k4096": CFG_A}


def test_the_two_kernels_tables_do_not_mix(pretend_gpu, monkeypatch):
    """Chapter 6's ConfigTable reads <GPU>.json and drops keys of another format; this one reads <GPU>.varlen.json."""
    (pretend_gpu / "shipped" / "Pretend_GPU.json").write_text(json.dumps({"configs": {
        "varlen/D128/bf16/causal/q4096/k4096": CFG_A, "fast/D128/bf16/causal/q4096/k4096/w4": CFG_B}}))
    monkeypatch.setattr(autotune, "SHIPPED_DIR", pretend_gpu / "shipped")
    assert autotune.ConfigTable("Pretend GPU").shipped == {"fast/D128/bf16/causal/q4096/k4096/w4": CFG_B}
    assert vc.VarlenTable("Pretend GPU").shipped == {}


def test_shipped_tables_are_read_by_their_lookup():
    """Every table under fa2/configs/ is read whole by its own lookup (what tools/wheel_smoke.py checks)."""
    for path in sorted(autotune.SHIPPED_DIR.glob("*.varlen.json")):
        data = json.loads(path.read_text())
        assert data["kernel"] == "varlen" and data["configs"]
        assert vc.VarlenTable(data["device"]).shipped == data["configs"], path.name
        assert all(set(cfg) == set(vc.CONFIG_FIELDS) for cfg in data["configs"].values())


# ------------------------------------------------------------------------------------------------ launch_config

def test_launch_config_reads_the_table_on_a_gpu(pretend_gpu):
    q = torch.empty(8, 4, 128, dtype=torch.bfloat16)
    ship(pretend_gpu, {"varlen/D128/bf16/causal/q4096/k4096": CFG_A})
    assert vc.launch_config(q, 3890, 3890, True, None) == CFG_A
    assert vc.launch_config(q, 1000, 1000, True, None) == CFG_A              # nearest length bucket
    assert vc.launch_config(q, 3890, 3890, False, None) == DEFAULT_CONFIG    # no full key: the fixed config
    assert vc.launch_config(q, 32768, 32768, True, (4096, 0)) == DEFAULT_CONFIG
    assert vc.launch_config(torch.empty(8, 4, 256, dtype=torch.bfloat16), 4096, 4096, True) == vc.WIDE_CONFIG
    vc.launch_config(q, 3890, 3890, True, None)["BLOCK_M"] = 1               # callers get copies
    assert vc.launch_config(q, 3890, 3890, True, None) == CFG_A


def test_launch_config_without_a_table_is_the_fixed_one(pretend_gpu):
    q = lambda D: torch.empty(8, 4, D, dtype=torch.float16)
    assert vc.launch_config(q(128), 512, 512) == DEFAULT_CONFIG == dict(BLOCK_M=128, BLOCK_N=64, num_warps=4,
                                                                        num_stages=2)
    assert vc.launch_config(q(96), 512, 512) == DEFAULT_CONFIG
    assert vc.launch_config(q(160), 512, 512) == vc.WIDE_CONFIG


def test_launch_config_under_the_interpreter_is_the_kernels_default(monkeypatch):
    monkeypatch.setattr(runtime, "INTERPRET", True)
    assert vc.launch_config(torch.empty(8, 4, 128, dtype=torch.bfloat16), 4096, 4096, True) is None


# ------------------------------------------------------------------------------------------------ the tuner

def test_tuner_cases_have_distinct_keys_and_the_benchmarks_come_first():
    from fa2.bench_dropin import varlen_problems, window_problems
    keys = [tune_varlen.problem_key(p) for s in tune_varlen.CASE_SETS for p in tune_varlen.CASES[s]]
    assert len(keys) == len(set(keys))
    assert tune_varlen.CASES["bench"] == [varlen_problems()[0], window_problems()[0]]
    assert keys[:2] == ["varlen/D128/bf16/causal/q4096/k4096", "varlen/D128/bf16/window/q32768/k4096"]


def test_tuner_compiles_each_binary_once():
    cands = {128: vc.candidates(128, H200_SMEM)}
    problems = [p for s in tune_varlen.CASE_SETS for p in tune_varlen.CASES[s]]
    jobs = tune_varlen.compile_jobs(problems, cands)
    assert len(jobs) == len({(j[1].sweep, j[1].causal, j[1].window is None, str(j[2])) for j in jobs})
    # the three window problems share their binaries (lengths multiples of 16, same flags)
    assert sum(j[1].sweep == "window" for j in jobs) == len(cands[128])


def test_a_winner_that_fails_the_ragged_check_never_ships(monkeypatch):
    bad = dict(CFG_B)
    monkeypatch.setattr(tune_varlen, "ragged_check", lambda cfg, *a: "AssertionError: off" if cfg == bad else None)
    ranked = {"varlen/D128/bf16/causal/q4096/k4096": [bad, CFG_A],
              "varlen/D128/bf16/window/q32768/k4096": [CFG_A, bad],
              "varlen/D128/bf16/full/q4096/k4096": [bad],
              "varlen/D128/bf16/full/q1024/k1024": []}
    chosen, failed = tune_varlen.ship(ranked, workers=0, log=lambda *a: None)
    assert chosen == {"varlen/D128/bf16/causal/q4096/k4096": CFG_A, "varlen/D128/bf16/window/q32768/k4096": CFG_A}
    assert set(failed) == {"varlen/D128/bf16/causal/q4096/k4096", "varlen/D128/bf16/full/q4096/k4096"}
    assert tune_varlen.ranked([dict(cfg=CFG_A, ok=True, ms=2.0), dict(cfg=CFG_B, ok=True, ms=1.0),
                               dict(cfg=bad, ok=False, ms=float("inf"))]) == [CFG_B, CFG_A]


def test_fa2_tune_kernel_varlen_needs_a_gpu(capsys):
    if runtime.DEVICE == "cuda":
        pytest.skip("CPU only")
    from fa2 import tune
    assert tune.main(["--kernel", "varlen"]) == 2
    assert tune.main(["--kernel=varlen", "--cases", "bench"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tune.main(["--kernel", "varlen", "--cases", "nope"])


# ------------------------------------------------------------------------------------------------ GPU only

@requires_gpu
def test_gpu_every_shipped_varlen_config_passes_the_ragged_check():
    """Each config of this GPU's varlen table against fp64 on ragged sequences, with its key's mask, through TMA
    and pointer loads (what the tuner checked before writing it)."""
    table = vc.VarlenTable(torch.cuda.get_device_name())
    if not table.shipped:
        pytest.skip(f"no {table.shipped_path.name} shipped")
    for key, cfg in table.shipped.items():
        dtype = torch.float16 if "/fp16/" in key else torch.bfloat16
        assert tune_varlen.ragged_check(cfg, key.split("/")[3], dtype, int(key.split("/")[1][1:])) is None, key


def test_the_table_records_the_tuning_command_once(monkeypatch):
    """The varlen table's `command` named `--kernel varlen` twice: fa2.tune handed its argv on with the flag and
    tune_varlen put it in front again. Both forms of the flag are dropped before it is written once."""
    from fa2 import tune, tune_varlen
    assert tune.without_kernel_flag(["--kernel", "varlen", "--jobs", "2"]) == ["--jobs", "2"]
    assert tune.without_kernel_flag(["--jobs", "2", "--kernel=varlen"]) == ["--jobs", "2"]
    handed = []
    monkeypatch.setattr(tune_varlen, "main", lambda argv: handed.append(argv) or 0)
    assert tune.main(["--kernel", "varlen", "--budget-s", "5"]) == 0
    assert handed == [["--budget-s", "5"]]
