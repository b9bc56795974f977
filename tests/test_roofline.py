"""Chapter 8's arithmetic and checklist (fa2.chapters.roofline, fa2.chapters.checklist), against hand counts."""
import pytest

from fa2.chapters.checklist import CHECKLIST, checklist, stall_shares, summarize
from fa2.chapters.roofline import (arithmetic_intensity, attainable_flops, attention_flops, attention_min_bytes,
                                   ridge_point, time_floor_s)


def test_flops_are_two_matmuls_halved_when_causal():
    # (2, 16, 4096, 64): S = QK^T and O = PV are 2·4096·4096·64 FLOPs each, per head, 32 heads
    assert attention_flops(2, 16, 4096, 4096, 64) == 2 * 16 * 2 * (2 * 4096 * 4096 * 64) == 137_438_953_472
    assert attention_flops(2, 16, 4096, 4096, 64, causal=True) == 68_719_476_736
    assert attention_flops(1, 32, 1, 32768, 128) == 4 * 32 * 32768 * 128          # one decode step


def test_min_bytes_read_inputs_once_and_write_outputs_once():
    # (8, 32, 2048, 128) bf16: q, k, v, o of 8·32·2048·128 elements, 2 bytes each, + LSE 8·32·2048 fp32
    elements = 8 * 32 * 2048 * 128
    assert attention_min_bytes(8, 32, 32, 2048, 2048, 128) == 4 * elements * 2 + 8 * 32 * 2048 * 4
    assert attention_min_bytes(8, 32, 32, 2048, 2048, 128, lse=False) == 536_870_912
    # GQA: k and v have Hkv heads; fp32 elements are 4 bytes
    assert attention_min_bytes(1, 32, 8, 1, 32768, 128, lse=False) == (2 * 32 * 128 + 2 * 8 * 32768 * 128) * 2
    assert attention_min_bytes(1, 4, 4, 16, 16, 8, element_bytes=4, lse=False) == 4 * 4 * 16 * 8 * 4


def test_intensity_of_the_causal_forward_is_n_over_4():
    for N in (512, 2048, 8192):
        flops = attention_flops(8, 32, N, N, 128, causal=True)
        assert arithmetic_intensity(flops, attention_min_bytes(8, 32, 32, N, N, 128, lse=False)) == N / 4


def test_decode_intensity_is_the_gqa_ratio():
    flops = attention_flops(1, 32, 1, 32768, 128)
    intensity = arithmetic_intensity(flops, attention_min_bytes(1, 32, 8, 1, 32768, 128, lse=False))
    assert intensity == pytest.approx(32 / 8, rel=1e-3)          # q and o add 0.02 %


def test_ridge_point_and_the_roof():
    peak, bandwidth = 800e12, 4e12                               # made-up ceilings, FLOP/s and bytes/s
    assert ridge_point(peak, bandwidth) == 200.0
    assert attainable_flops(50.0, peak, bandwidth) == 200e12     # left of the ridge: I·β
    assert attainable_flops(1000.0, peak, bandwidth) == peak     # right of it: the peak
    assert time_floor_s(8e12, 1e9, peak, bandwidth) == 0.01      # compute time 10 ms > memory time 0.25 ms
    assert time_floor_s(8e9, 4e9, peak, bandwidth) == 1e-3       # memory time 1 ms > compute time 10 us


WGMMA_KERNEL = {
    "gpu__time_duration.sum": 612345.0,
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": 71.8,
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": 47.25,
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": 0.0,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 0.75,
    "smsp__average_warps_issue_stalled_long_scoreboard_pipe_l1tex_per_issue_active.ratio": 0.70,  # a sub-reason
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": 1.5,
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 1.75,
    "smsp__average_warps_issue_stalled_wait_not_issued_per_issue_active.ratio": 9.0,                # not counted
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 1.0,
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum": 0.0,
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": 0.0,
    "launch__shared_mem_per_block_static": 0.0,
    "launch__shared_mem_per_block_dynamic": 99328.0,
}


def test_summary_reads_the_wgmma_counter_and_normalised_stall_shares():
    s = summarize(WGMMA_KERNEL)
    assert s["tensor_pct"] == 47.25 and s["tensor_pipe"] == "tensor_wgmma_pct"
    assert s["names"]["tensor_pct"] == "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
    assert list(s["stalls"]) == ["wait", "math_pipe_throttle", "selected", "long_scoreboard"]   # largest first
    assert sum(s["stalls"].values()) == pytest.approx(100.0)
    assert s["long_scoreboard_pct"] == pytest.approx(100 * 0.75 / 5.0)
    assert s["local_memory"] == 0.0 and s["shared_bytes"] == 99328.0
    assert s["dram_bytes"] is None and s["achieved_occupancy_pct"] is None        # not in this profile
    verdicts = [met for _, _, met in checklist(s)]
    assert verdicts == [True, False, True, True]


def test_an_mma_sync_kernel_reads_the_hmma_counter():
    mma = {"sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": 0.0,
           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": 55.0}
    s = summarize(mma)
    assert s["tensor_pct"] == 55.0 and s["tensor_pipe"] == "tensor_mma_pct"


def test_stall_families_fall_back_in_order_and_missing_metrics_are_not_judged():
    pct = {"smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct": 30.0,
           "smsp__warp_issue_stalled_barrier_per_warp_active.pct": 10.0,
           "smsp__warp_issue_stalled_selected_per_warp_active.pct": 10.0}
    family, shares = stall_shares(pct)
    assert family == "smsp__warp_issue_stalled_*_per_warp_active.pct" and shares["long_scoreboard"] == 60.0
    s = summarize({"l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum": 512.0})
    results = {check.quantity: (value, met) for check, value, met in checklist(s)}
    assert results["local_memory"] == (512.0, False)                             # spill traffic: not met
    assert results["sm_throughput_pct"] == (None, None) and results["long_scoreboard_pct"] == (None, None)


def test_the_checklist_is_the_books_yardstick():
    assert [(c.quantity, c.op, c.threshold) for c in CHECKLIST] == [
        ("sm_throughput_pct", ">=", 70.0), ("tensor_pct", ">=", 50.0), ("long_scoreboard_pct", "<", 20.0),
        ("local_memory", "==", 0.0)]
    assert all(c.remedy for c in CHECKLIST)
