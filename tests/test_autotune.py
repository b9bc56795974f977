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
                        lambda *a: type("P", (), {"shared_memory_per_block_optin": 227 * 1024})())
    monkeypatch.setattr(autotune, "SHIPPED_DIR", tmp_path / "shipped")
    monkeypatch.setenv("FA2_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(autotune, "_TABLES", {})
    monkeypatch.setattr(autotune, "_CHOSEN", {})
    (tmp_path / "shipped").mkdir()
    return tmp_path


def _qkv(n=2048, d=128, dtype=torch.bfloat16):
    return [torch.empty(1, 1, n, d, dtype=dtype) for _ in range(3)]


def _ship(folder, configs):
    (folder / "shipped" / "Test_GPU.json").write_text(json.dumps({"configs": configs}))


def test_key_and_buckets():
    q, k, v = _qkv(2000)
    assert autotune.tuning_key("fast", q, k, True) == "fast/D128/bf16/causal/q2048/k2048"
    assert autotune.length_bucket(1) == 128 and autotune.length_bucket(2049) == 4096


def test_shipped_config_is_used_without_tuning(fake_gpu, monkeypatch):
    cfg = dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2)
    _ship(fake_gpu, {"fast/D128/bf16/causal/q2048/k2048": cfg})
    monkeypatch.setattr(autotune, "tune", lambda *a, **k: pytest.fail("autotuned despite a shipped config"))
    q, k, v = _qkv()
    assert autotune.choose_config("fast", q, k, True, None, None) == cfg
    q, k, v = _qkv(5000)   # another length: nearest tuned bucket of the same family, still no tuning
    assert autotune.choose_config("fast", q, k, True, None, None) == cfg


def test_unknown_family_autotunes_once_and_caches(fake_gpu, monkeypatch, capsys):
    _ship(fake_gpu, {"fast/D128/bf16/causal/q2048/k2048": dict(BLOCK_M=128, BLOCK_N=64, num_warps=4, num_stages=2)})
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
    assert cached["configs"]["fast/D64/bf16/full/q2048/k2048"] == first


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


def test_shipped_tables_are_well_formed():
    for path in autotune.SHIPPED_DIR.glob("*.json"):
        table = json.loads(path.read_text())
        assert table["configs"], path
        for key, cfg in table["configs"].items():
            assert key.split("/")[0] in ("fast", "generic") and "num_warps" in cfg


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
