"""Config choice: shipped tables are used without tuning; unknown keys autotune once, say so, and cache."""
import json

import pytest
import torch

from fa2 import runtime
from fa2.chapters import autotune


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """Pretend to be a GPU named 'Test GPU' with its own shipped/cache folders (CPU only: it fakes torch.cuda)."""
    if runtime.DEVICE == "cuda":
        pytest.skip("simulates a GPU on the CPU")
    monkeypatch.setattr(runtime, "INTERPRET", False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Test GPU")
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda *a: type("P", (), {"shared_memory_per_block_optin": 227 * 1024,
                                                  "multi_processor_count": SMS})())
    monkeypatch.setattr(autotune, "SHIPPED_DIR", tmp_path / "shipped")
    monkeypatch.setenv("FA2_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(autotune, "_TABLES", {})
    monkeypatch.setattr(autotune, "_CHOSEN", {})
    (tmp_path / "shipped").mkdir()
    return tmp_path


SMS = 132   # an H200's SMs


def _qkv(n=2048, d=128, dtype=torch.bfloat16, b=8, h=32):
    return [torch.empty(b, h, n, d, dtype=dtype) for _ in range(3)]


def _ship(folder, configs):
    (folder / "shipped" / "Test_GPU.json").write_text(json.dumps({"configs": configs}))


def test_key_and_buckets():
    q, k, v = _qkv(2000)
    assert autotune.tuning_key("fast", q, k, True, SMS) == "fast/D128/bf16/causal/q2048/k2048/w4"
    assert autotune.length_bucket(1) == 128 and autotune.length_bucket(2049) == 4096


@pytest.mark.parametrize("D, fast, generic", [(64, "D64", "D64"), (80, "D64+16", "D128"), (96, "D64+32", "D128"),
                                              (100, "D128", "D128"), (160, "D128+32", "D256"),
                                              (192, "D128+64", "D256"), (256, "D256", "D256")])
def test_key_names_the_tile_pieces(D, fast, generic):
    """160 and 192 run 128 + 32 and 128 + 64 columns on Hopper: they must not share 256's configs."""
    q, k, v = _qkv(d=D)
    assert autotune.tuning_key("fast", q, k, False, SMS).split("/")[1] == fast
    assert autotune.tuning_key("generic", q, k, False, SMS).split("/")[1] == generic


@pytest.mark.parametrize("b, h, n, bucket", [
    (1, 1, 128, "w0"), (1, 16, 512, "w0"), (1, 33, 512, "w1"),     # 64 and 132 programs of 128 rows
    (1, 16, 2048, "w1"), (8, 16, 512, "w1"), (1, 132, 512, "w4"),  # 256, 512 and 528 = 4 x 132
    (8, 32, 2048, "w4")])
def test_key_buckets_the_waves(b, h, n, bucket):
    q, k, v = _qkv(n=n, b=b, h=h)
    assert autotune.tuning_key("fast", q, k, True, SMS).endswith("/" + bucket)
    assert autotune.waves_bucket(q, SMS) == bucket


def test_nearest_key_prefers_the_same_waves(fake_gpu):
    """A small grid borrows a small grid's config of another length before a full grid's of its own."""
    full, small = (dict(BLOCK_M=m, BLOCK_N=64, num_warps=4, num_stages=2) for m in (128, 64))
    _ship(fake_gpu, {"fast/D64/bf16/full/q2048/k2048/w4": full, "fast/D64/bf16/full/q512/k512/w1": small})
    q, k, v = _qkv(n=2048, d=64, b=1, h=16)                           # 256 programs: w1
    assert autotune.choose_config("fast", q, k, False, None, None) == small
    assert autotune.tuned_for_its_waves("fast", q, k, False, SMS)
    q, k, v = _qkv(n=1024, d=64, b=32, h=16)                          # w4, 1024 is 1 bucket from 512 and 2048
    assert autotune.choose_config("fast", q, k, False, None, None) == full
    q, k, v = _qkv(n=2048, d=64, b=1, h=1)                            # w0: neither bucket was tuned
    assert not autotune.tuned_for_its_waves("fast", q, k, False, SMS)


def test_keys_of_an_older_format_are_ignored(fake_gpu):
    """A cache written before keys had a waves part (and before 160 stopped meaning 256) is not read."""
    _ship(fake_gpu, {"fast/D256/bf16/full/q2048/k2048": dict(BLOCK_M=64, BLOCK_N=64, num_warps=4, num_stages=3)})
    assert autotune.ConfigTable("Test GPU").shipped == {}


def test_shipped_config_is_used_without_tuning(fake_gpu, monkeypatch):
    cfg = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2)
    _ship(fake_gpu, {"fast/D128/bf16/causal/q2048/k2048/w4": cfg})
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: pytest.fail("autotuned despite a shipped config"))
    q, k, v = _qkv()
    assert autotune.choose_config("fast", q, k, True, None, None) == cfg
    q, k, v = _qkv(5000)   # another length: nearest tuned bucket of the same family, still no tuning
    assert autotune.choose_config("fast", q, k, True, None, None) == cfg


def test_unknown_family_autotunes_once_and_caches(fake_gpu, monkeypatch, capsys):
    _ship(fake_gpu, {"fast/D128/bf16/causal/q2048/k2048/w4": dict(BLOCK_M=128, BLOCK_N=64, num_warps=4,
                                                                   num_stages=2)})
    calls = []

    def fake_tune(run, candidates, reference, **kw):
        calls.append(len(candidates))
        return candidates[0], []

    monkeypatch.setattr(autotune, "tune", fake_tune)
    q, k, v = _qkv(d=64)
    first = autotune.choose_config("fast", q, k, False, None, lambda: None)
    assert calls and "autotuning once" in capsys.readouterr().err
    monkeypatch.setattr(autotune, "_TABLES", {})          # a new process: reads the disk cache
    monkeypatch.setattr(autotune, "_CHOSEN", {})
    assert autotune.choose_config("fast", q, k, False, None, None) == first
    assert len(calls) == 1
    cached = json.loads((fake_gpu / "cache" / "Test_GPU.json").read_text())
    assert cached["configs"]["fast/D64/bf16/full/q2048/k2048/w4"] == first


def test_tune_never_picks_a_failing_config():
    ref = torch.randn(8, 8)
    outs = [torch.full_like(ref, float("nan")), ref * 1.1, ref.clone()]
    best, results = autotune.tune(lambda cfg: outs[cfg["i"]], [dict(i=i) for i in range(3)], ref,
                                  bench=lambda fn: 1.0)
    assert best == dict(i=2) and [r["ok"] for r in results] == [False, False, True]
    with pytest.raises(RuntimeError, match="no candidate"):
        autotune.tune(lambda cfg: outs[0], [dict(i=0)], ref, bench=lambda fn: 1.0)


def test_prune_drops_what_cannot_fit():
    kept = autotune.prune("fast", autotune.FAST_CANDIDATES, 256, 227 * 1024)
    assert kept and all(c["BLOCK_M"] == 64 for c in kept)
    assert autotune.prune("fast", [dict(BLOCK_M=128, BLOCK_N=128, num_warps=4, num_stages=2)], 64, 1 << 20) == []


def test_prune_sizes_the_tiles_each_kernel_runs():
    """Shared memory 2 * width * (128 + 2 * 128 * 2) bytes: 200 KB for Hopper's 128 + 32 columns at D = 160, 320 KB
    for the 256 columns of D = 256 and of chapter 5's kernel at D = 160 (227 KB fit)."""
    cfg = dict(BLOCK_M=128, BLOCK_N=128, num_warps=8, num_stages=2)
    assert autotune.prune("fast", [cfg], 160, 227 * 1024) == [cfg]
    assert autotune.prune("fast", [cfg], 256, 227 * 1024) == []
    generic = dict(block_m=128, block_n=128, num_warps=8, num_stages=2)
    assert autotune.prune("generic", [generic], 160, 227 * 1024) == []
    assert [autotune.tile_width("fast", d) for d in (80, 96, 160, 192)] == [80, 96, 160, 192]


def test_shipped_tables_are_well_formed():
    for path in autotune.SHIPPED_DIR.glob("*.json"):
        if path.name.endswith((".varlen.json", ".gluon.json")):   # chapters 10 and 12: tests of their own
            continue
        table = json.loads(path.read_text())
        assert table["configs"], path
        for key, cfg in table["configs"].items():
            assert key.split("/")[0] in ("fast", "generic") and "num_warps" in cfg
            assert key.count("/") == autotune.KEY_PARTS - 1, key      # the lookup ignores any other format


def test_api_autotune_path_runs_and_caches(fake_gpu, monkeypatch):
    """The API hands tune a run() that returns the output tensor (a bug once: it returned (o, lse))."""
    from fa2 import plan
    from fa2.testing import check_attention
    real_tune = autotune.tune
    chosen = []

    def tune_without_gpu_timer(run, candidates, reference, **kw):
        best, results = real_tune(run, candidates[:2], reference, bench=lambda fn: (fn(), 1.0)[1])
        assert all(r["ok"] for r in results), results
        chosen.append(best)
        return best, results

    monkeypatch.setattr(autotune, "tune", tune_without_gpu_timer)
    check_attention(lambda q, k, v, causal, scale: plan.make_plan(q, k, v, causal, 0.125)(q, k, v), 1, 2, 1, 40, 40, 32,
                    torch.bfloat16, True, scale=0.125)
    assert len(chosen) == 1


def test_tune_cases_aim_at_their_keys():
    """`python -m fa2.tune --cases headdim` tunes the two-piece head dims at the head-dim sweep's full grids;
    `--cases tail` tunes grids under 4 waves (buckets w0, w1) of the head dims the reference sweep uses."""
    from fa2 import tune as tuner
    keys = lambda sets: {autotune.tuning_key("fast", *[torch.empty(b, h, n, d, dtype=torch.float16)] * 2, False, SMS)
                         for b, h, n, d in tuner.tuning_cases(sets)}
    assert {key.split("/")[1] for key in keys(["headdim"])} == {"D64+16", "D64+32", "D128+32", "D128+64"}
    assert {key.rsplit("/", 1)[1] for key in keys(["headdim"])} == {"w4"}
    assert {key.rsplit("/", 1)[1] for key in keys(["tail"])} == {"w0", "w1"}
    assert {key.rsplit("/", 1)[1] for key in keys(["reference"])} == {"w4"}     # what the shipped table holds
    assert len(tuner.tuning_cases()) == len(set(tuner.tuning_cases()))


def test_tune_compiles_each_binary_once_and_merges_tables():
    from fa2 import tune as tuner
    cases = [((1, 16, 512, 64), torch.float16, False), ((8, 16, 512, 64), torch.float16, False),
             ((1, 16, 512, 64), torch.float16, True), ((2, 32, 2048, 96), torch.float16, False)]
    candidates = {64: autotune.FAST_CANDIDATES[:3], 96: autotune.FAST_CANDIDATES[:2]}
    jobs = tuner.compile_jobs("fast", cases, candidates)
    assert len(jobs) == (1 + 3) * 2 + (1 + 2)       # reference + candidates per (D, dtype, mask): B, H, N alike
    previous = {"configs": {"a": 1}, "candidates": {"a": []}, "note": "n", "command": "python -m fa2.tune"}
    document = tuner.new_document(previous, "GPU", "fast", ["--cases", "tail"])
    assert document["configs"] == {"a": 1} and document["note"] == "n"
    assert document["command"] == "python -m fa2.tune; python -m fa2.tune --cases tail"
    document["configs"]["b"] = 2
    assert previous["configs"] == {"a": 1}
    assert tuner.new_document({}, "GPU", "fast", [])["command"] == "python -m fa2.tune"
