"""The profiling CLI without a GPU: its refusal, the ncu CSV parser on a fixture, its CSV schema, its cases."""
import json
import sys
import time
from pathlib import Path

import inspect

import pytest
import torch

from fa2 import profile, runtime
from fa2.chapters.autotune import prune
from fa2.chapters.roofline import attention_flops

FIXTURE = Path(__file__).parent / "data" / "ncu_raw_fixture.csv"   # ncu's `--csv --page raw` layout, values made up


@pytest.mark.skipif(runtime.DEVICE == "cuda", reason="with a GPU the CLI profiles instead of refusing")
def test_cli_refuses_without_a_gpu(tmp_path, capsys):
    assert profile.main(["--out", str(tmp_path / "p")]) == 2
    message = capsys.readouterr().err
    assert "needs a CUDA GPU" in message and "ncu" in message and "gpu/profile.sh" in message
    assert not (tmp_path / "p").exists()
    assert profile.main(["--target", '{"study": "kernels"}']) == 2


def test_raw_page_parser_reads_units_separators_and_skips_the_program_output():
    launches = profile.parse_ncu_csv(FIXTURE.read_text())
    assert [launch["launch"] for launch in launches] == ["0", "1"]
    fast, cudnn = (launch["metrics"] for launch in launches)
    assert launches[0]["kernel"] == "_fa2_fast_kernel" and launches[1]["kernel"].startswith("cudnn_generated")
    assert fast["dram__bytes_read.sum"] == ("byte", 1_207_959_552.0)            # "1,207,959,552"
    assert fast["gpu__time_duration.sum"] == ("nsecond", 612_345.0)
    assert fast["launch__registers_per_thread"] == ("register/thread", 168.0)
    assert "device__attribute_display_name" not in fast                         # text, not a number
    assert "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active" not in cudnn   # "n/a"
    assert cudnn["l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"] == ("byte", 2048.0)
    kept = {name for name, _, _ in profile.measurements(launches[0])}
    assert "device__attribute_max_shared_memory_per_block_optin" not in kept and "dram__bytes_read.sum" in kept


def test_details_page_parser_gives_the_same_launches():
    details = "\n".join([
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"',
        '"0","4242","python3.12","127.0.0.1","_fa2_fast_kernel","1","7","(128, 1, 1)","(32, 256, 1)","0","9.0",'
        '"Command line profiler metrics","gpu__time_duration.sum","nsecond","612,345"',
        '"0","4242","python3.12","127.0.0.1","_fa2_fast_kernel","1","7","(128, 1, 1)","(32, 256, 1)","0","9.0",'
        '"Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","n/a"'])
    launches = profile.parse_ncu_csv(details)
    assert launches == [{"launch": "0", "kernel": "_fa2_fast_kernel",
                         "metrics": {"gpu__time_duration.sum": ("nsecond", 612345.0)}}]
    assert profile.parse_ncu_csv("==ERROR== the application returned an error\n") == []


def test_query_metrics_picks_the_names_this_ncu_knows():
    listing = """Device NVIDIA H200 (GH100)
------------------------------------------ --------- ----------- -----------------------------------
Metric Name                                Metric Type Metric Unit Metric Description
------------------------------------------ --------- ----------- -----------------------------------
dram__bytes_read                           Counter   byte        # of bytes read from DRAM
sm__pipe_tensor_op_gmma_cycles_active      Counter   cycle       # of cycles where the GMMA pipe was active
sm__throughput                             Throughput %          SM throughput
"""
    available = profile.parse_query_metrics(listing)
    assert available == {"dram__bytes_read", "sm__pipe_tensor_op_gmma_cycles_active", "sm__throughput"}
    assert profile.requested_metrics(available) == [
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "dram__bytes_read.sum"]


def test_results_round_trip_through_the_long_csv(tmp_path):
    case = profile.Case("kernels", "sdpa_cudnn", 2, 16, 16, 4096, 4096, 64, True)
    broken = profile.Case("decode", "decode", 1, 32, 8, 1, 32768, 128, False)
    writer = profile.Writer(tmp_path / "m.csv", "python -m fa2.profile --out x")
    writer.write(case, "do_bench", "do_bench_median_ms", "ms", 0.25)
    for launch in profile.parse_ncu_csv(FIXTURE.read_text()):
        for name, unit, value in profile.measurements(launch):
            writer.write(case, "ncu", name, unit, value, launch["launch"], launch["kernel"])
    writer.write(broken, "error", "error", "", "timing: NotImplementedError: fa2.decode does not exist")
    writer.close()
    results = profile.read_results(tmp_path / "m.csv")
    assert [r.case for r in results] == [case, broken]
    assert results[0].metrics == {"do_bench_median_ms": 0.25} and len(results[0].kernels) == 2
    assert results[0].main_kernel()["kernel"] == "_fa2_fast_kernel"             # the longer of the two
    assert results[1].errors == ["timing: NotImplementedError: fa2.decode does not exist"]
    assert results[1].kernels == [] and results[1].main_kernel() is None


def test_cases_cover_four_kernels_two_shapes_and_every_pruning_rule():
    cases = profile.all_cases(["kernels", "configs", "decode"])
    kernels = [c for c in cases if c.study == "kernels"]
    assert {(c.provider, c.B, c.H, c.N_Q, c.D) for c in kernels} == {
        (p, *shape) for p in profile.KERNEL_PROVIDERS for shape in profile.KERNEL_SHAPES}
    assert all(c.causal and c.dtype == "bf16" and c.flops() == attention_flops(c.B, c.H, c.N_Q, c.N_KV, c.D, True)
               for c in kernels)
    configs = [profile.parse_config(c.config) for c in cases if c.study == "configs"]
    assert configs == profile.STUDY_CONFIGS
    assert all(profile.parse_config(profile.config_text(c)) == c for c in configs)
    kept = prune("fast", configs, 128, 227 * 1024)
    assert 0 < len(kept) < len(configs)
    dropped = [c for c in configs if c not in kept]
    assert any(2 * 128 * (c["BLOCK_M"] + 2 * c["BLOCK_N"] * c["num_stages"]) > 227 * 1024 for c in dropped)
    assert any(c["BLOCK_M"] * c["BLOCK_N"] >= 128 * 128 and c["num_warps"] == 4 for c in dropped)
    assert any(c["BLOCK_M"] * 128 // (32 * c["num_warps"]) > 128 for c in dropped)
    assert [c.N_KV for c in cases if c.study == "decode"] == [32768]


FAKE_NCU = '''#!{python}
"""Stands in for ncu: refuses one metric, writes an empty report, prints the fixture on --import."""
import sys
from pathlib import Path
args = sys.argv[1:]
if "--import" in args:
    print(Path({fixture!r}).read_text())
    sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",") if "--metrics" in args else []
if "sm__made_up.sum" in metrics:
    print("==ERROR== Failed to find metric sm__made_up.sum")
    sys.exit(1)
Path(args[args.index("--export") + 1] + ".ncu-rep").write_bytes(b"")
print("==PROF== Disconnected from process 4242")
'''


def test_ncu_run_drops_a_refused_metric_and_reads_the_report(tmp_path):
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable, fixture=str(FIXTURE)))
    ncu.chmod(0o755)
    case = profile.Case("kernels", "fa2", 2, 16, 16, 4096, 4096, 64, True)
    metrics = ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__made_up.sum"]
    launches, error = profile.ncu_profile(str(ncu), case, metrics, tmp_path / "case0", time.monotonic() + 60)
    assert error == "" and [launch["launch"] for launch in launches] == ["0", "1"]
    assert metrics == ["sm__throughput.avg.pct_of_peak_sustained_elapsed"]        # dropped for later cases
    command = profile.ncu_command(str(ncu), case, metrics, tmp_path / "case0")
    assert command[1:7] == ["--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all"]
    assert command[-3:-1] == ["fa2.profile", "--target"] and profile.Case(**json.loads(command[-1])) == case
    assert profile.rejected_metrics(metrics, "==ERROR== the application returned an error code (1)") == []


def test_gluon_study_profiles_the_gluon_config_beside_chapter6_and_cudnn(monkeypatch):
    """--studies gluon: the money shot through the Gluon config the shipped table runs there (rung 4, persistent,
    128-key tiles with K and V freed separately and the diagonal halved), chapter 6's kernel and cuDNN, so chapter 12 reads their
    tensor-pipe use from one run. Chapter 6's
    kernel is fa2.attention's plan made with the Gluon dispatch off: "fa2" could be the Gluon kernel itself (the
    first run profiled it twice that way)."""
    cases = profile.all_cases(["gluon"])
    assert [(c.provider, c.B, c.H, c.N_Q, c.D, c.causal) for c in cases] == [
        (p, 8, 32, 2048, 128, True) for p in ("gluon", "chapter6", "sdpa_cudnn")]
    from fa2 import plan as fa2_plan
    from fa2.gluon import dispatch
    asked = []
    monkeypatch.setattr(fa2_plan, "make_plan", lambda q, k, v, causal, scale: asked.append(dispatch.ENABLED)
                        or (lambda q, k, v: ("o", "lse")))
    run = profile.build(cases[1])
    q = torch.randn(1, 2, 8, 16, dtype=torch.float16, device=runtime.DEVICE)
    assert run(q, q, q) == "o" and run(q, q, q) == "o" and asked == [False] and dispatch.ENABLED
    gluon = profile.parse_config(cases[0].config)
    assert gluon == profile.GLUON_CONFIG and gluon["rung"] == 4
    families = dispatch.shipped_families("NVIDIA H200")
    q = torch.empty(8, 32, 2048, 128, dtype=torch.bfloat16, device="meta")   # the shape, no memory
    assert (4, {k: v for k, v in gluon.items() if k != "rung"}) == dispatch.gluon_choice(q, q, q, True, 0.088,
                                                                                         families)
    with pytest.raises(SystemExit):
        profile.parse_args(["--out", "x", "--studies", "gluon,nonesuch"])
    assert profile.parse_args(["--out", "x", "--studies", "gluon"]).studies == ["gluon"]
    source = inspect.getsource(profile.main)     # every study's rows have a CSV to go to
    assert all(f'"{study}": ' in source for study in ("kernels", "decode", "gluon"))
