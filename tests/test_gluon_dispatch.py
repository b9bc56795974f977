"""fa2.gluon.dispatch: which calls fa2.attention sends to the Gluon kernel (CPU: the table and the rule; the kernel
itself runs only on an sm_90 GPU, where chapter 12 and gpu/gluon_check.py run it)."""
import csv
import json
from pathlib import Path

import pytest
import torch

from fa2 import plan as fa2_plan
from fa2.gluon import dispatch
from fa2.gluon.candidates import CONFIGS

RESULTS = Path(__file__).resolve().parents[1] / "book" / "results"
FAMILY = dict(D=128, dtype="bf16", causal=True, N=8192, BH=32, rung=4, config=dict(BLOCK_N=64), provider="x",
              gluon_ms=1.0, fa2_ms=1.1, speedup=1.1)


def row(provider, ms, B=1, H=32, Hkv=32, N=8192, D=128, dtype="bf16", causal=True, check="ok"):
    return dict(provider=provider, ms=str(ms), B=str(B), H=str(H), Hkv=str(Hkv), N_Q=str(N), N_KV=str(N), D=str(D),
                dtype=dtype, causal=str(causal), check=check)


def tensors(B=1, H=32, Hkv=32, N_Q=8192, N_KV=8192, D=128, dtype=torch.bfloat16):
    q = torch.empty(B, H, N_Q, D, dtype=dtype, device="meta")
    k = torch.empty(B, Hkv, N_KV, D, dtype=dtype, device="meta")
    return q, k, k


def test_build_families_keeps_the_fastest_checked_config_above_the_threshold():
    names = {"gluon_a": (1, {"BLOCK_M": 64}), "gluon_b": (4, {})}
    rows = [row("fa2", 1.00), row("gluon_a", 0.95), row("gluon_b", 0.90), row("gluon_c", 0.50),   # c: unchecked
            row("fa2", 1.00, N=2048), row("gluon_a", 0.98, N=2048),                              # 1.02x: below
            row("fa2", 1.00, N=512), row("gluon_a", 0.50, N=512, check="fail"),                  # failed its check
            row("fa2", 1.00, Hkv=8), row("gluon_a", 0.50, Hkv=8)]                                # GQA: not covered
    families = dispatch.build_families(rows, names)
    assert [(f["N"], f["BH"], f["rung"], f["provider"], f["speedup"]) for f in families] == [
        (8192, 32, 4, "gluon_b", round(1 / 0.9, 4))]


def test_nearest_family_covers_a_factor_of_two_and_never_crosses_d_dtype_or_causal():
    families = [FAMILY, dict(FAMILY, N=512, BH=1024, rung=1)]
    assert dispatch.nearest_family(families, 128, "bf16", True, 8192, 32)["rung"] == 4
    assert dispatch.nearest_family(families, 128, "bf16", True, 16384, 64)["rung"] == 4     # 2x in both: covered
    assert dispatch.nearest_family(families, 128, "bf16", True, 16385, 32) is None          # past 2x in N
    assert dispatch.nearest_family(families, 128, "bf16", True, 8192, 65) is None           # past 2x in B*H
    assert dispatch.nearest_family(families, 128, "bf16", True, 600, 900)["rung"] == 1
    for other in ((64, "bf16", True), (128, "fp16", True), (128, "bf16", False)):
        assert dispatch.nearest_family(families, *other, 8192, 32) is None


def test_gluon_choice_only_for_what_was_measured():
    families = [FAMILY]
    assert dispatch.gluon_choice(*tensors(), True, 0.088, families) == (4, {"BLOCK_N": 64})
    assert dispatch.gluon_choice(*tensors(), True, -0.088, families) is None          # negative scale
    assert dispatch.gluon_choice(*tensors(Hkv=8), True, 0.088, families) is None      # GQA
    assert dispatch.gluon_choice(*tensors(N_KV=8000), True, 0.088, families) is None  # N_Q != N_KV
    assert dispatch.gluon_choice(*tensors(dtype=torch.float32), True, 0.088, families) is None
    assert dispatch.gluon_choice(*tensors(D=96), True, 0.088, [dict(FAMILY, D=96)]) is None
    assert dispatch.gluon_choice(*tensors(), False, 0.088, families) is None          # not causal: no family
    assert dispatch.gluon_choice(*tensors(), True, 0.088, []) is None


def test_choose_is_none_off_sm90_and_under_the_interpreter():
    q, k, v = (torch.randn(1, 2, 64, 64) for _ in range(3))
    assert dispatch.choose(q, k, v, True, 0.125) is None


def test_plan_runs_the_gluon_kernel_when_the_table_chooses_it(monkeypatch):
    """make_plan asks fa2.gluon.dispatch first; a choice becomes a GluonPlan that calls attention_gluon with the
    chosen rung and config, the call's causal flag and scale (stubbed here: the kernel needs an sm_90 GPU)."""
    from fa2.gluon import attention_hopper
    calls = []
    monkeypatch.setattr(dispatch, "choose", lambda q, k, v, causal, scale: (4, {"PINGPONG": 1}))
    monkeypatch.setattr(attention_hopper, "attention_gluon",
                        lambda q, k, v, causal, scale, rung, config: calls.append((causal, scale, rung, config))
                        or ("o", "lse"))
    q = torch.randn(1, 2, 64, 64)
    made = fa2_plan.make_plan(q, q, q, True, 0.125)
    assert made.kernel == "gluon" and made(q, q, q) == ("o", "lse")
    assert calls == [(True, 0.125, 4, {"PINGPONG": 1})]
    monkeypatch.setattr(dispatch, "choose", lambda *args: None)
    assert fa2_plan.make_plan(q, q, q, True, 0.125).kernel != "gluon"


def test_config_text_is_gluon_checks_column():
    """The candidates' configs are written as gpu/gluon_check.py writes its config column (the check CSV is how
    the table builder knows which configs passed)."""
    rows = list(csv.DictReader(open(RESULTS / "gluon_check.csv", newline="")))
    texts = {(int(r["rung"]), r["config"]) for r in rows}
    assert (1, dispatch.config_text(CONFIGS["r1_m64n64b2w4"][1])) in texts
    assert (4, dispatch.config_text(CONFIGS["r4_n64b3_pingpong"][1])) in texts


def test_checked_needs_every_case_ok(tmp_path):
    path = tmp_path / "check.csv"
    lines = ["rung,config,check"] + ["1,A=1,ok"] * 96 + ["2,,ok"] * 95 + ["3,,ok"] * 95 + ["3,,fail"]
    path.write_text("\n".join(lines) + "\n")
    assert dispatch.checked(path) == {(1, "A=1")}


@pytest.mark.parametrize("table", sorted(dispatch.SHIPPED_DIR.glob("*.gluon.json")), ids=lambda p: p.name)
def test_shipped_table_is_its_measurement(table):
    """Every shipped family is a config that passed all of gluon_check.py's fp64 cases, measured faster than
    chapter 6's kernel by the threshold in the run the table names; rebuilding from that run's CSV gives the
    same families (the table is a function of committed data, not edited by hand)."""
    shipped = json.loads(table.read_text())
    assert shipped["families"], "an empty table should not be shipped"
    rows = list(csv.DictReader(open(RESULTS / shipped["source"], newline="")))
    rebuilt = dispatch.build_families(rows, dispatch.candidates(dispatch.checked()), shipped["threshold"])
    assert rebuilt == shipped["families"]
    done = dispatch.checked()
    for family in shipped["families"]:
        assert (family["rung"], dispatch.config_text(family["config"])) in done
        assert family["speedup"] >= shipped["threshold"] >= 1.0
