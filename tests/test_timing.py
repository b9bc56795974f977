"""fa2.testing.time_ms, the one timer of the book, the benchmarks and the tuner."""
import triton.testing

from fa2 import runtime, testing


def test_graph_timer_waits_for_the_callers_stream(monkeypatch):
    """do_bench_cudagraph runs every call on a side stream of its own, which does not wait for work queued on
    the caller's stream. Without a synchronisation first, the decode sweep's copy (into buffers the caching
    allocator had just taken back from the fp64 reference's temporaries) ran while the reference was still
    being computed on the GPU, and the full-length check failed at 32k-128k keys for every provider alike."""
    events = []
    monkeypatch.setattr(runtime, "DEVICE", "cuda")
    monkeypatch.setattr(testing.torch.cuda, "synchronize", lambda *a: events.append("synchronize"))
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph",
                        lambda fn, **kw: events.append("graph") or 1.0)
    assert testing.time_ms(lambda: None, cuda_graph=True) == 1.0
    assert events == ["synchronize", "graph"]
