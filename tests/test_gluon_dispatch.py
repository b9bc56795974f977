"""fa2.gluon.dispatch: which calls fa2.attention sends to the Gluon kernel (CPU: the table and the rule; the kernel
itself runs only on an sm_90 GPU, where chapter 12 and gpu/gluon_check.py run it)."""
import csv
import json
import math
from pathlib import Path

import pytest
import torch
import triton

import fa2
from fa2 import plan as fa2_plan
from fa2 import runtime
from fa2.chapters.fast import tma_compatible
from fa2.chapters.reference import attention_reference
from fa2.testing import check_attention, make_qkv
from fa2.validate import softmax_scale
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


def listed(families):
    return [(f["N"], f["BH"], f["rung"], f["provider"]) for f in families if f["rung"] is not None]


def test_build_families_keeps_the_fastest_checked_config_above_the_threshold():
    names = {"gluon_a": (1, {"BLOCK_M": 64}), "gluon_b": (4, {})}
    rows = [row("fa2", 1.00), row("gluon_a", 0.95), row("gluon_b", 0.90), row("gluon_c", 0.50),   # c: unchecked
            row("fa2", 1.00, N=2048), row("gluon_a", 0.98, N=2048),                              # 1.02x: below
            row("fa2", 1.00, N=512), row("gluon_a", 0.50, N=512, check="fail"),                  # failed its check
            row("fa2", 1.00, Hkv=8), row("gluon_a", 0.50, Hkv=8)]                                # GQA: not covered
    families = dispatch.build_families(rows, names)
    assert listed(families) == [(8192, 32, 4, "gluon_b")]
    assert families[-1]["speedup"] == round(1 / 0.9, 4)
    # every measured MHA shape is in the table, the ones that stay on chapter 6's kernel with rung None
    assert sorted((f["N"], f["rung"]) for f in families) == [(512, None), (2048, None), (8192, 4)]


def test_a_win_must_hold_up_in_the_other_runs():
    """A single run's few per cent can be noise: a win is kept only if the Gluon time is not above chapter 6's
    time in any other run that timed the shape, and the config also won wherever another run timed it beside."""
    names = {"gluon_a": (1, {})}
    rows = [row("fa2", 1.00, N=n) for n in (512, 2048, 8192)] + [row("gluon_a", 0.90, N=n) for n in (512, 2048, 8192)]
    others = [[row("fa2", 0.89, N=512)],                                   # chapter 6 was faster there once
              [row("fa2", 0.95, N=2048), row("gluon_a", 0.96, N=2048)],   # side by side, the config lost
              [row("fa2", 0.95, N=8192), row("gluon_a", 0.93, N=8192)]]   # side by side, it won again
    families = dispatch.build_families(rows, names, others=others)
    assert listed(families) == [(8192, 32, 1, "gluon_a")]
    assert {f["N"]: f["confirmed_by"] for f in families} == {512: 1, 2048: 1, 8192: 1}


def rounds(provider, times, B=1, H=32, N=8192, D=128):
    """Rows of an interleaved-rounds CSV (gpu/money_ab.py): one per round."""
    return [dict(B=str(B), H=str(H), N=str(N), D=str(D), dtype="bf16", causal="True", round=str(r),
                 provider=provider, ms=str(ms)) for r, ms in enumerate(times)]


def test_interleaved_rounds_decide_the_shapes_they_timed():
    """Where interleaved rounds timed chapter 6's kernel ('fa2_ch6') beside candidates, their medians decide:
    a single run's 2 % becomes a switch when every interleaved run shows 11 %, a single run's 10 % is undone
    when an interleaved run shows the config slower, a candidate timed in fewer runs does not outrank one timed
    in all of them, and fa2.attention's own rows ('fa2') are not chapter 6's kernel."""
    names = {"gluon_a": (4, {"A": 1}), "gluon_b": (4, {"B": 1})}
    rows = [row("fa2", 1.00, N=n) for n in (2048, 8192, 512)] + [
        row("gluon_a", 0.98, N=2048), row("gluon_a", 0.90, N=8192), row("gluon_a", 0.99, N=512)]
    run1 = (rounds("fa2_ch6", [1.00, 1.12, 1.11], N=2048) + rounds("gluon_a", [1.00, 1.00, 0.99], N=2048)
            + rounds("fa2_ch6", [1.00, 1.00, 1.00], N=8192) + rounds("gluon_a", [1.02, 1.01, 1.03], N=8192)
            + rounds("fa2", [0.10] * 3, N=512) + rounds("gluon_a", [0.50] * 3, N=512))
    run2 = (rounds("fa2_ch6", [1.15, 1.14, 1.16], N=2048) + rounds("gluon_a", [1.0, 1.02, 1.01], N=2048)
            + rounds("gluon_b", [0.5, 0.5, 0.5], N=2048))
    families = {f["N"]: f for f in dispatch.build_families(rows, names, interleaved=[run1, run2])}
    assert families[2048]["rung"] == 4 and families[2048]["config"] == {"A": 1}
    assert families[2048]["interleaved"] == 2 and families[2048]["interleaved_provider"] == "gluon_a"
    assert families[2048]["interleaved_speedup"] == round(1.11 / 1.00, 4)     # the worse of the two runs
    assert families[2048]["speedup"] == round(1 / 0.98, 4)                    # the single run's, kept
    assert families[8192]["rung"] is None and families[8192]["interleaved_speedup"] < 1
    assert families[512]["rung"] is None and "interleaved" not in families[512]   # no fa2_ch6 rounds there
    without = {f["N"]: f for f in dispatch.build_families(rows, names)}
    assert without[2048]["rung"] is None and without[8192]["rung"] == 4


def test_newer_interleaved_runs_decide_the_shapes_they_timed():
    """Newer interleaved runs (--newer) decide a shape they timed with chapter 6's kernel, even where the older
    runs timed the shape too and their candidate was timed in more runs; a shape only the older runs timed keeps
    their verdict."""
    names = {"gluon_a": (4, {"A": 1}), "gluon_b": (4, {"B": 1})}
    rows = [row("fa2", 1.00, N=n) for n in (2048, 512)] + [row("gluon_a", 0.98, N=n) for n in (2048, 512)]
    old = [rounds("fa2_ch6", [1.2] * 3, N=n) + rounds("gluon_a", [1.0] * 3, N=n) for n in (2048, 512)]
    old = [old[0] + old[1], old[0] + old[1]]
    newer = [rounds("fa2_ch6", [1.2] * 3, N=512) + rounds("gluon_a", [1.0] * 3, N=512)
             + rounds("gluon_b", [0.9] * 3, N=512)]
    families = {f["N"]: f for f in dispatch.build_families(rows, names, interleaved=old, newer=newer)}
    assert families[512]["config"] == {"B": 1} and families[512]["interleaved_newer"] is True
    assert families[512]["interleaved"] == 1 and families[512]["interleaved_speedup"] == round(1.2 / 0.9, 4)
    assert families[2048]["config"] == {"A": 1} and families[2048]["interleaved"] == 2
    assert "interleaved_newer" not in families[2048]
    without = {f["N"]: f for f in dispatch.build_families(rows, names, interleaved=old)}
    assert without[512]["config"] == {"A": 1}


def test_a_candidate_timed_only_in_later_runs_competes_by_its_median():
    """Pooled runs that timed different candidates: one added in the later two runs, faster than chapter 6's kernel
    in both by more than the one timed in all four, is chosen (each run is its own baseline); one timed in a single
    run is not, however fast it was there."""
    names = {"gluon_a": (4, {"A": 1}), "gluon_b": (3, {"B": 1}), "gluon_c": (1, {"C": 1})}
    rows = [row("fa2", 1.00, N=512), row("gluon_a", 0.90, N=512)]
    early = [rounds("fa2_ch6", [1.2] * 3, N=512) + rounds("gluon_a", [1.0] * 3, N=512)] * 2
    later = [rounds("fa2_ch6", [1.18] * 3, N=512) + rounds("gluon_a", [1.0] * 3, N=512)
             + rounds("gluon_b", [0.9] * 3, N=512)] * 2
    once = [rounds("fa2_ch6", [1.2] * 3, N=512) + rounds("gluon_c", [0.5] * 3, N=512)]
    family = dispatch.build_families(rows, names, newer=early + later + once)[0]
    assert family["interleaved_provider"] == "gluon_b" and family["config"] == {"B": 1}
    assert family["interleaved"] == 5 and family["interleaved_speedup"] == round(1.18 / 0.9, 4)


def test_a_shape_only_interleaved_runs_timed_is_a_family_of_its_own():
    """A shape between the reference sweep's that interleaved runs timed with chapter 6's kernel becomes a family
    decided by them (so N = 1024 no longer takes the N = 512 family's config on trust); rows without chapter 6's
    kernel add nothing."""
    names = {"gluon_a": (4, {"A": 1}), "gluon_b": (3, {"B": 1})}
    rows = [row("fa2", 1.00, N=512), row("gluon_b", 0.80, N=512)]
    run = (rounds("fa2_ch6", [1.2] * 3, N=1024) + rounds("gluon_a", [1.0] * 3, N=1024)
           + rounds("gluon_b", [1.1] * 3, N=1024) + rounds("gluon_a", [1.0] * 3, N=4096))
    families = {f["N"]: f for f in dispatch.build_families(rows, names, newer=[run, run])}
    assert sorted(families) == [512, 1024]
    assert families[512]["config"] == {"B": 1} and "interleaved_only" not in families[512]
    assert families[1024]["config"] == {"A": 1} and families[1024]["interleaved_only"] is True
    assert families[1024]["fa2_ms"] is None and "speedup" not in families[1024]
    assert dispatch.nearest_family(list(families.values()), 128, "bf16", True, 1024, 32)["config"] == {"A": 1}


def test_nearest_family_covers_a_factor_of_two_and_never_crosses_d_dtype_or_causal():
    families = [FAMILY, dict(FAMILY, N=512, BH=1024, rung=1)]
    assert dispatch.nearest_family(families, 128, "bf16", True, 8192, 32)["rung"] == 4
    assert dispatch.nearest_family(families, 128, "bf16", True, 16384, 64)["rung"] == 4     # 2x in both: covered
    assert dispatch.nearest_family(families, 128, "bf16", True, 16385, 32) is None          # past 2x in N
    assert dispatch.nearest_family(families, 128, "bf16", True, 8192, 65) is None           # past 2x in B*H
    assert dispatch.nearest_family(families, 128, "bf16", True, 600, 900)["rung"] == 1
    for other in ((64, "bf16", True), (128, "fp16", True), (128, "bf16", False)):
        assert dispatch.nearest_family(families, *other, 8192, 32) is None


def test_a_shape_between_a_win_and_a_loss_goes_to_the_nearer_and_a_tie_to_chapter_6():
    families = [FAMILY, dict(FAMILY, N=2048, rung=None, config=None)]        # Gluon won at 8192, lost at 2048
    choice = lambda N: dispatch.gluon_choice(*tensors(N_Q=N, N_KV=N), True, 0.088, families)
    assert choice(8192) == (4, {"BLOCK_N": 64}) and choice(6000) == (4, {"BLOCK_N": 64})
    assert choice(2048) is None and choice(3000) is None
    assert choice(4096) is None                                               # as far from both: chapter 6


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
    assert dispatch.gluon_choice(*tensors(N_Q=0, N_KV=0), True, 0.088, families) is None   # empty: no log(0)
    assert dispatch.gluon_choice(*tensors(B=0), True, 0.088, families) is None


def test_choose_is_none_off_sm90_and_under_the_interpreter_and_when_disabled():
    q, k, v = (torch.randn(1, 2, 64, 64) for _ in range(3))
    assert dispatch.choose(q, k, v, True, 0.125) is None
    assert dispatch.ENABLED
    with dispatch.disabled():
        assert not dispatch.ENABLED
    assert dispatch.ENABLED


def test_plan_runs_the_gluon_kernel_when_the_table_chooses_it(monkeypatch):
    """make_plan asks fa2.gluon.dispatch first; a choice becomes a GluonPlan that launches the Gluon kernel with
    the chosen rung and config, the call's causal flag and scale, through a DirectLaunch fixed once (the launch is
    recorded here: the kernel needs an sm_90 GPU)."""
    from fa2.gluon import attention_hopper
    monkeypatch.setattr(dispatch, "choose", lambda q, k, v, causal, scale: (4, {"PINGPONG": 1}))
    q = torch.randn(1, 2, 200, 64, device=runtime.DEVICE).to(torch.bfloat16)
    made = fa2_plan.make_plan(q, q, q, True, 0.125)
    assert made.kernel == "gluon" and (made.rung, made.config) == (4, {"PINGPONG": 1})
    cfg = attention_hopper.rung_config(4, 64, {"PINGPONG": 1})
    assert made.launch.kernel is attention_hopper._attention_fwd_hopper
    assert made.launch.grid == (triton.cdiv(200, cfg["BLOCK_M"]), 2, 1)
    boxes = [layout[2] for layout in made.layouts]                    # rung 4: q and o boxes are half tiles
    half, keys = [1, 1, cfg["BLOCK_M"] // 2, 64], [1, 1, cfg["BLOCK_N"], 64]
    assert boxes == [half, keys, keys, half]
    H, group, n_q, n_kv, qk_scale, window_left, BH, schedule = made.scalars
    constexprs = list(made.constexprs)
    assert (H, group, n_q, n_kv, window_left, BH) == (2, 1, 200, 200, -1, 2)
    assert schedule.dtype == torch.int32 and schedule.numel() == 1         # not SCHEDULED: one unused element
    assert qk_scale == pytest.approx(0.125 * math.log2(math.e))
    assert constexprs == list(attention_hopper._constexprs(4, True, cfg).values()) and constexprs[0] is True
    calls = []
    made.launch = type("Recorder", (), {"ready": lambda self: False,
                                        "__call__": lambda self, *args: calls.append(args)})()
    o, lse = made(q, q, q)
    (args,) = calls
    assert [d.base is t for d, t in zip(args[:4], (q, q, q, o))] == [True] * 4
    assert args[4] is lse and lse.shape == (1, 2, 200) and o.shape == q.shape
    assert [list(d.block_shape) for d in args[:4]] == boxes and args[5:-1] == made.scalars
    assert args[-1] is o                                   # o_ptr: O's tensor, the last run-time argument
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
    # the check's command line may list a config's items in another order than the candidate does
    path.write_text("\n".join(["rung,config,check"] + ["4,PINGPONG=1 SPLIT_EMPTY=1 BLOCK_N=128,ok"] * 96) + "\n")
    assert dispatch.checked(path) == {(4, dispatch._sorted_text("BLOCK_N=128 PINGPONG=1 SPLIT_EMPTY=1"))}


def test_checked_counts_a_config_checked_again(tmp_path):
    """A config checked again (gpu/append_checks.py appends a second run of its 96 cases) still passed when every
    run did; a second run with a failure, or one cut short by its time limit, leaves it out."""
    path = tmp_path / "check.csv"
    lines = (["rung,config,check"] + ["1,A=1,ok"] * 192 + ["2,,ok"] * 96 + ["2,,ok"] * 95 + ["2,,fail"]
             + ["3,,ok"] * 150)
    path.write_text("\n".join(lines) + "\n")
    assert dispatch.checked(path) == {(1, "A=1")}


@pytest.mark.parametrize("table", sorted(dispatch.SHIPPED_DIR.glob("*.gluon.json")), ids=lambda p: p.name)
def test_shipped_table_is_its_measurement(table):
    """Every shipped Gluon family is a config that passed all of gluon_check.py's fp64 cases, measured faster
    than chapter 6's kernel by the threshold in the run the table names and held up against the other runs it
    names; rebuilding from those committed CSVs gives the same table (it is not edited by hand)."""
    shipped = json.loads(table.read_text())
    read = lambda name: list(csv.DictReader(open(RESULTS / name, newline="")))
    rebuilt = dispatch.build_families(read(shipped["source"]), dispatch.candidates(dispatch.checked()),
                                      shipped["threshold"], others=[read(name) for name in shipped["others"]],
                                      interleaved=[read(name) for name in shipped.get("interleaved", [])],
                                      newer=[read(name) for name in shipped.get("interleaved_newer", [])])
    assert rebuilt == shipped["families"]
    assert shipped["configs"] == dispatch.configs_of(rebuilt) and shipped["command"] and shipped["triton"]
    gluon = [f for f in shipped["families"] if f["rung"] is not None]
    assert gluon, "a table without a Gluon family should not be shipped"
    done = dispatch.checked()
    for family in gluon:
        assert (family["rung"], dispatch._sorted_text(dispatch.config_text(family["config"]))) in done
        decided = family["interleaved_speedup"] if "interleaved" in family else family["speedup"]
        assert decided >= shipped["threshold"] >= 1.0
    if "windows" in shipped:                  # the window families: rebuilt from their sweep the same way
        windows = dispatch.build_windows(read(shipped["windows_source"]), dispatch.candidates(done),
                                         shipped["threshold"])
        assert windows == shipped["windows"] and shipped["windows_command"].startswith("python gpu/gluon_window.py")
        for family in windows:
            assert family["rung"] is None or (family["rung"],
                                              dispatch._sorted_text(dispatch.config_text(family["config"]))) in done


def test_the_headline_shape_runs_the_persistent_config_by_interleaved_rounds():
    """(8, 32, 2048, 128) bf16 causal: the persistent rung-4 config with 128-key tiles, K and V freed separately
    and the lower consumer's diagonal tile halved (ping-pong) runs there, by interleaved rounds, and at
    (1, 32, 8192, 128). Newer runs (--newer) decide the shapes they timed: at (32, 32, 512, 128) causal the
    persistent config with own key ranges and a 5-deep ring of 64-key tiles (bf16 and fp16); at (8, 32, 512, 128)
    causal and the shapes between the reference sweep's around it (B*H 128 and 512, interleaved runs alone),
    rung 3 on 64-row tiles at two programs per SM; at N = 1024 with B*H = 256 (as near N = 512 as N = 2048) a
    config of the longer shapes, the 128-key one in bf16 and the 64-key ring in fp16; at D = 64 causal bf16 N = 2048
    rung 1 with 128-key tiles."""
    families = dispatch.shipped_families("NVIDIA H200")
    choice = lambda B, N, dtype=torch.bfloat16: dispatch.gluon_choice(
        *tensors(B=B, H=32, N_Q=N, N_KV=N, dtype=dtype), True, 0.088, families)
    money = (4, CONFIGS["r4_n128b2_pingpong_persistent_split_half"][1])
    deep = (4, CONFIGS["r4_n64b5_persistent_own_pairplan"][1])
    two_per_sm = (3, CONFIGS["r3_m64n64b2_persistent_split_x2"][1])
    assert choice(8, 2048) == money and choice(1, 8192) == money
    for dtype in (torch.bfloat16, torch.float16):
        assert choice(32, 512, dtype) == deep
        assert choice(4, 512, dtype) == choice(8, 512, dtype) == choice(16, 512, dtype) == two_per_sm
    assert choice(8, 1024) == money and choice(8, 1024, torch.float16) == deep
    assert two_per_sm[1]["PROGRAMS_PER_SM"] == 2
    # D = 64 causal bf16 at N = 2048, B*H 128 and 512: rung 1 with 128-key tiles (gluon_x2_d64_ab_{1,2}.csv)
    for B in (8, 32):
        assert dispatch.gluon_choice(*tensors(B=B, H=16, Hkv=16, N_Q=2048, N_KV=2048, D=64), True, 0.125,
                                     families) == (1, CONFIGS["r1_m64n128b2w4"][1])


def test_chapter6_plan_is_made_with_the_dispatch_off(monkeypatch):
    """fa2.plan.chapter6_plan: the plan fa2.attention would make without the Gluon dispatch (the benchmark's
    fa2_ch6 provider and fa2.profile's chapter6 case time it beside fa2 in the same run); inputs checked first."""
    asked = []
    monkeypatch.setattr(fa2_plan, "make_plan", lambda q, k, v, causal, scale: asked.append((dispatch.ENABLED, scale))
                        or "plan")
    q = torch.randn(1, 2, 16, 64, dtype=torch.float16, device=runtime.DEVICE)
    assert fa2_plan.chapter6_plan(q, q, q, True, None) == "plan"
    assert asked == [(False, 64 ** -0.5)] and dispatch.ENABLED
    with pytest.raises(ValueError, match="q"):
        fa2_plan.chapter6_plan(q[0], q, q, True, None)


def test_ladder_top_rung_is_chapter6_with_the_dispatch_on(monkeypatch):
    """fa2.ladder's v5 (chapter 6's last rung, the notebook's ladder and fa2@v5) runs chapter 6's kernel through
    its launch plan even where fa2.attention would run chapter 12's Gluon kernel: a Gluon plan made here fails."""
    from fa2 import ladder

    def gluon_for(q, k, v, causal, scale):
        return (4, {}) if dispatch.ENABLED else None

    def gluon_plan(*args):
        raise AssertionError("v5 made a Gluon plan")

    monkeypatch.setattr(fa2_plan, "gluon_for", gluon_for)
    monkeypatch.setattr(fa2_plan, "GluonPlan", gluon_plan)
    monkeypatch.setattr(fa2_plan, "CHAPTER6_PLANS", {})
    monkeypatch.setattr(fa2_plan, "PLANS", {})
    q, k, v = (torch.randn(1, 2, 40, 16, dtype=torch.float16, device=runtime.DEVICE) for _ in range(3))
    o, lse = ladder.version("v5").run(q, k, v, True)
    ref, ref_lse = attention_reference(q, k, v, True, return_lse=True)
    assert (o.double() - ref).abs().max().item() < 2e-3 and (lse.double() - ref_lse).abs().max().item() < 1e-5
    with pytest.raises(AssertionError, match="Gluon plan"):
        fa2.attention(q, k, v, causal=True)      # the same call through fa2.attention takes the Gluon plan


def test_bench_times_chapter6_beside_fa2():
    from fa2 import bench
    provider = bench.all_providers()["fa2_ch6"]
    shape = bench.Shape(1, 2, 2, 32, 32, True, "fp16")
    assert "chapter 6" in provider.label and callable(provider.build(shape))


HOPPER = runtime.DEVICE == "cuda" and torch.cuda.get_device_capability() == (9, 0)


@pytest.mark.skipif(not HOPPER, reason="the Gluon kernels need an sm_90 GPU")
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("D,dtype,causal,layout", [(64, torch.bfloat16, True, "bhnd"),
                                                   (128, torch.float16, False, "bnhd"),
                                                   (128, torch.bfloat16, True, "strided")])
def test_gluon_plan_on_gpu_matches_fp64_on_every_launch_path(monkeypatch, name, D, dtype, causal, layout):
    """A GluonPlan's first call goes through Triton's JIT, later ones straight to the compiled launcher with
    descriptors encoded per address: every path matches the fp64 reference (tails: N = 300), on fresh tensors
    (new addresses) and the same ones again."""
    rung, config = CONFIGS[name]
    monkeypatch.setattr(dispatch, "choose", lambda q, k, v, causal, scale: (rung, dict(config)))
    plans = {}

    def fn(q, k, v, causal, scale):
        scale = softmax_scale(q.shape[-1], scale)
        plan = plans.setdefault("plan", fa2_plan.make_plan(q, k, v, causal, scale))
        assert plan.kernel == "gluon"
        return plan(q, k, v)

    for _ in range(3):                                         # JIT launch, then direct launches
        if layout == "strided" and not tma_compatible(*make_qkv(1, 2, 2, 300, 300, D, dtype, layout)):
            pytest.skip("strided layout is not TMA-compatible")
        check_attention(fn, B=2, Hq=4, Nq=300, D=D, dtype=dtype, causal=causal, layout=layout)
    assert plans["plan"].launch.ready()


def test_chapter6_time_of_a_run_is_fa2_ch6_where_it_has_it():
    """A run made with the dispatch on times fa2.attention ('fa2', maybe the Gluon kernel) and chapter 6's kernel
    alone ('fa2_ch6'): the table builder must take chapter 6's time from 'fa2_ch6' there, and from 'fa2' only in
    runs without it (made before the dispatch existed)."""
    row = dict(check="ok", Hkv="16", H="16", N_Q="2048", N_KV="2048", D="64", dtype="bf16", causal="True", B="8")
    both = [dict(row, provider="fa2", ms="0.5"), dict(row, provider="fa2_ch6", ms="0.7")]
    assert dispatch._times(both) == {(64, "bf16", True, 2048, 128): {"fa2": 0.7}}
    assert dispatch._times(both[:1]) == {(64, "bf16", True, 2048, 128): {"fa2": 0.5}}


# ------------------------------------------------------------------------------------------ sliding windows

WINDOW = dict(D=128, dtype="bf16", N=32768, BH=16, window_left=4095, rung=4, config=dict(BLOCK_N=64),
              provider="x", gluon_ms=1.0, ch10_ms=1.2, speedup=1.2)


def window_row(provider, ms, N=32768, B=1, H=16, left=4095, D=128, dtype="bf16", check="ok"):
    return dict(provider=provider, ms=str(ms), B=str(B), H=str(H), N=str(N), D=str(D), dtype=dtype,
                window_left=str(left), check=check)


def test_window_choice_only_for_the_kernels_window_and_what_was_measured():
    """The Gluon kernel's window is (left, 0): a bounded left side, the causal diagonal on the right (causal, or
    right 0 without causal: the same mask when N_Q == N_KV), no softcap. And only within a factor of 2 of a
    measured family in N, B·H and left + 1."""
    choose = lambda *x, causal=True, left=4095, right=0, softcap=0.0, scale=0.088, windows=(WINDOW,): \
        dispatch.window_choice(*tensors(*x[:1], **(x[1] if len(x) > 1 else {})), causal, scale, left, right,
                               softcap, list(windows))
    q = dict(H=16, Hkv=16, N_Q=32768, N_KV=32768)
    assert choose(1, q) == (4, {"BLOCK_N": 64})
    assert choose(1, q, right=-1) == (4, {"BLOCK_N": 64})            # causal: the right side is the diagonal
    assert choose(1, q, causal=False, right=0) == (4, {"BLOCK_N": 64})
    assert choose(1, q, causal=False, right=-1) is None              # left only: keys after the query too
    assert choose(1, q, causal=False, right=5) is None
    assert choose(1, q, left=-1) is None                             # no window at all
    assert choose(1, q, softcap=30.0) is None
    assert choose(1, q, scale=-0.088) is None
    assert choose(1, dict(q, Hkv=8)) is None                         # GQA: not measured
    assert choose(1, dict(q, N_KV=32000)) is None                    # N_Q != N_KV
    assert choose(1, dict(q, dtype=torch.float16)) is None           # another dtype's family only
    assert choose(1, q, left=2047) == (4, {"BLOCK_N": 64})           # left + 1 within a factor of 2
    assert choose(1, q, left=2046) is None
    assert choose(1, q, left=8191) == (4, {"BLOCK_N": 64}) and choose(1, q, left=8192) is None
    assert choose(2, q) == (4, {"BLOCK_N": 64}) and choose(4, q) is None       # B·H 32, 64
    assert choose(1, dict(q, N_Q=65536, N_KV=65536)) == (4, {"BLOCK_N": 64})
    assert choose(1, dict(q, N_Q=65537, N_KV=65537)) is None
    assert choose(1, q, windows=[dict(WINDOW, rung=None, config=None)]) is None
    near = dict(WINDOW, window_left=1023, rung=None, config=None)    # the nearer family decides
    assert choose(1, q, left=1500, windows=[WINDOW, near]) is None
    assert choose(1, q, left=3000, windows=[WINDOW, near]) == (4, {"BLOCK_N": 64})
    assert choose(1, q, windows=[]) is None


def test_build_windows_keeps_the_fastest_checked_config_beating_chapter_10():
    names = {"gluon_a": (4, {"A": 1}), "gluon_b": (1, {"B": 1})}
    rows = [window_row("fa2_ch10", 1.2), window_row("gluon_a", 1.0), window_row("gluon_b", 0.9),
            window_row("gluon_c", 0.5),                                          # not a checked config
            window_row("fa2_ch10", 1.0, left=1023), window_row("gluon_a", 0.98, left=1023),   # under 3 %
            window_row("fa2_ch10", 1.0, N=8192), window_row("gluon_b", 0.5, N=8192, check="fail")]
    families = dispatch.build_windows(rows, names)
    by_left = {(f["N"], f["window_left"]): f for f in families}
    assert (by_left[(32768, 4095)]["rung"], by_left[(32768, 4095)]["provider"]) == (1, "gluon_b")
    assert by_left[(32768, 4095)]["speedup"] == pytest.approx(1.2 / 0.9, abs=1e-4)
    assert by_left[(32768, 1023)]["rung"] is None and by_left[(32768, 1023)]["speedup"] == pytest.approx(1 / 0.98, abs=1e-4)
    assert by_left[(8192, 4095)]["rung"] is None and "provider" not in by_left[(8192, 4095)]


def test_a_windowed_call_runs_the_gluon_plan_the_table_chooses(monkeypatch):
    """fa2.attention(window=...) asks the window table first: a choice becomes a GluonPlan with the window's left
    size and the causal mask, cached per signature and window; without one, chapter 10's kernel runs."""
    import fa2
    made = []

    class Recorder:
        def __init__(self, q, k, v, causal, scale, choice, window_left=-1):
            made.append((causal, scale, choice, window_left))

        def __call__(self, q, k, v):
            return torch.full_like(q, 7.0), q.new_zeros(q.shape[:3], dtype=torch.float32)

    monkeypatch.setattr(fa2_plan, "GluonPlan", Recorder)
    monkeypatch.setattr(fa2_plan, "WINDOW_PLANS", {})
    monkeypatch.setattr(dispatch, "choose_window", lambda q, k, v, causal, scale, left, right, softcap:
                        (4, {"PINGPONG": 1}) if softcap == 0 else None)
    q, k, v = (torch.randn(1, 2, 64, 32, device=runtime.DEVICE, dtype=torch.float16) for _ in range(3))
    for _ in range(2):
        assert (fa2.attention(q, k, v, causal=False, window=(20, 0)) == 7).all()
    assert made == [(True, pytest.approx(32 ** -0.5), (4, {"PINGPONG": 1}), 20)]   # one plan, made once
    o = fa2.attention(q, k, v, causal=True, window=(20, 0), softcap=5.0)  # no choice: chapter 10's kernel
    assert not (o == 7).all() and len(made) == 1


@pytest.mark.skipif(not HOPPER, reason="the Gluon kernels need an sm_90 GPU")
@pytest.mark.parametrize("name", ["r4_n64b3_pingpong", "r1_m128n64b2w4", "r1_m64n64b2w4",
                                  "r4_n128b2_pingpong_scheduled", "r4_n64b3_pingpong_scheduled_own"])
@pytest.mark.parametrize("D,dtype,N,left", [(128, torch.bfloat16, 300, 37), (64, torch.float16, 700, 256),
                                            (128, torch.float16, 1000, 0)])
def test_windowed_gluon_plan_on_gpu_matches_fp64(monkeypatch, name, D, dtype, N, left):
    """fa2.attention with a window through a windowed GluonPlan (JIT launch, then direct launches on fresh
    tensors) matches the fp64 reference with the window's mask."""
    import fa2
    rung, config = CONFIGS[name]
    monkeypatch.setattr(fa2_plan, "WINDOW_PLANS", {})
    monkeypatch.setattr(dispatch, "choose_window", lambda *args: (rung, dict(config)))
    fn = lambda q, k, v, causal, scale, window: fa2.attention(q, k, v, causal, scale, return_lse=True,
                                                              window=window)
    for _ in range(3):
        check_attention(fn, B=2, Hq=4, Nq=N, D=D, dtype=dtype, causal=True, window=(left, 0))
    (plan,) = fa2_plan.WINDOW_PLANS.values()
    assert plan.kernel == "gluon" and plan.launch.ready()


def test_the_table_lookup_reads_the_shipped_folder_where_it_is_used(monkeypatch, tmp_path):
    """A test that points autotune.SHIPPED_DIR at a folder of its own sees no Gluon table there, and the real
    tables are read again once it is restored (bug: dispatch bound the folder when first imported, so a test that
    imported it under the patch left every later lookup reading an empty folder, and its cache kept the miss)."""
    from fa2.chapters import autotune
    real = dispatch.shipped_families("NVIDIA H200")
    assert real
    with monkeypatch.context() as patch:
        patch.setattr(autotune, "SHIPPED_DIR", tmp_path)
        assert dispatch.shipped_families("NVIDIA H200") == []
        assert dispatch.shipped_devices() == []
    assert dispatch.shipped_families("NVIDIA H200") == real


def test_an_h100_borrows_the_h200_prefill_table_and_another_gpu_only_when_asked(monkeypatch):
    """The Gluon tables were measured on an H200. An H100 SXM reads the H200's prefill families by default (its
    headline sweep, book/results/headline_h100.csv, timed them faster than chapter 6's kernel with the H100's own
    configs) but not its window families (not measured there). Another sm_90 GPU keeps chapter 6's kernel unless
    FA2_GLUON_TABLE names a GPU whose table to use, for prefill and windows alike. A name without a table is an
    error that says so, not a silent fallback."""
    import torch
    monkeypatch.setattr(dispatch, "_can_run", lambda q, k, v: True)
    q = torch.empty(8, 32, 2048, 128, dtype=torch.bfloat16, device="meta")
    big = torch.empty(1, 32, 32768, 128, dtype=torch.bfloat16, device="meta")
    families = dispatch.shipped_families("NVIDIA H200")
    monkeypatch.delenv("FA2_GLUON_TABLE", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H100 80GB HBM3")
    assert dispatch.choose(q, q, q, True, 0.088) == dispatch.gluon_choice(q, q, q, True, 0.088, families) is not None
    assert dispatch.choose_window(big, big, big, True, 0.088, 4095, 0, 0.0) is None
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H100 PCIe")
    assert dispatch.choose(q, q, q, True, 0.088) is None
    assert dispatch.choose_window(q, q, q, True, 0.088, 1023, 0, 0.0) is None
    monkeypatch.setenv("FA2_GLUON_TABLE", "NVIDIA H200")
    assert dispatch.choose(q, q, q, True, 0.088) == dispatch.gluon_choice(q, q, q, True, 0.088, families) is not None
    assert dispatch.choose_window(big, big, big, True, 0.088, 4095, 0, 0.0) == dispatch.window_choice(
        big, big, big, True, 0.088, 4095, 0, 0.0, dispatch.shipped_windows("NVIDIA H200"))
    monkeypatch.setenv("FA2_GLUON_TABLE", "NVIDIA H300")
    with pytest.raises(ValueError, match="FA2_GLUON_TABLE.*NVIDIA H300"):
        dispatch.choose(q, q, q, True, 0.088)
