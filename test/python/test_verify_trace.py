"""The CUDA profiler trace, read on the CPU: hand-made chrome traces (the shape torch.profiler exports) for
the side-stream join rule and the own-vs-library GPU time shares that check_cuda_profile reports."""

from __future__ import annotations

import pytest

from kforge_worker.checks import trace
from kforge_worker.checks.execution_checks import side_stream_outcome

MARK = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, float*)"
CALLER, SIDE = 7, 13


def kernel(name, stream, ts, dur, cat="kernel"):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"stream": stream, "device": 0}}


def profiled(*events, end_at=10.0):
    """A trace: start marker at 0, the forward's events, the end marker (the last on the caller) at end_at,
    and host-side events that are not stream work."""
    evs = [kernel(MARK, CALLER, 0.0, 2.0), *events]
    noise = [{"ph": "X", "cat": "cpu_op", "name": "aten::add_", "ts": 0.5, "dur": 3.0},
             {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0.1, "dur": 4.0}]
    return {"traceEvents": noise + [kernel(MARK, CALLER, end_at, 2.0)] + evs}


def forward_of(tr):
    forward = trace.split_markers(trace.stream_work(tr))
    assert forward is not None
    return forward


def test_markers_are_split_off_and_the_callers_stream_found():
    tr = profiled(kernel("gemm_kernel(float*)", CALLER, 3.0, 5.0))
    forward = forward_of(tr)
    assert forward.caller_stream == CALLER
    assert [k.name for k in forward.kernels] == ["gemm_kernel(float*)"]
    assert forward.end_marker is not None and forward.end_marker.start == 10.0


def test_no_side_stream_passes():
    forward = forward_of(profiled(kernel("a(float*)", CALLER, 3.0, 2.0), kernel("b(float*)", CALLER, 5.0, 2.0)))
    verdict = trace.side_stream_join(forward)
    assert verdict.joined is True and not verdict.streams
    assert side_stream_outcome(forward).outcome == "pass"


def test_a_joined_side_stream_passes_with_a_disclosure():
    # side work ends at 40; the caller waited for it: the end marker starts at 43
    forward = forward_of(profiled(kernel("side_gemm(float*)", SIDE, 3.0, 37.0),
                                  kernel("main_part(float*)", CALLER, 4.0, 6.0), end_at=43.0))
    verdict = trace.side_stream_join(forward)
    assert verdict.joined is True and SIDE in verdict.streams
    check = side_stream_outcome(forward)
    assert check.outcome == "pass" and "joined" in check.evidence and f"stream {SIDE}" in check.evidence


def test_side_work_still_running_when_the_caller_resumed_is_not_joined():
    # the end marker starts at 10 while the side stream's GEMM runs until 40: nothing made the caller wait
    forward = forward_of(profiled(kernel("side_gemm(float*)", SIDE, 3.0, 37.0)))
    verdict = trace.side_stream_join(forward)
    assert verdict.joined is False and verdict.overrun_us == pytest.approx(30.0)
    check = side_stream_outcome(forward)
    assert check.outcome == "fail" and check.fail_verdict == "cheating"
    assert "side_gemm" in check.evidence and "30.0 µs" in check.evidence


def test_side_work_that_starts_after_the_caller_resumed_is_not_joined():
    forward = forward_of(profiled(kernel("late_copy(float*)", SIDE, 11.0, 1.0)))
    assert trace.side_stream_join(forward).joined is False


def test_a_side_stream_copy_counts_too():
    memcpy = kernel("Memcpy DtoD (Device -> Device)", SIDE, 4.0, 20.0, cat="gpu_memcpy")
    forward = forward_of(profiled(memcpy))
    assert trace.side_stream_join(forward).joined is False


def test_without_an_end_marker_the_join_is_undecided():
    tr = {"traceEvents": [kernel(MARK, CALLER, 0.0, 2.0), kernel("side(float*)", SIDE, 3.0, 5.0)]}
    forward = forward_of(tr)
    assert forward.end_marker is None and trace.side_stream_join(forward).joined is None
    assert side_stream_outcome(forward).outcome == "warn"
    assert side_stream_outcome(None).outcome == "warn"


def test_shares_split_own_kernels_from_library_ones():
    forward = forward_of(profiled(
        kernel("ampere_sgemm_128x64_tn", CALLER, 2.0, 25.0),
        kernel("void fused_bias_relu_kernel<float>(float const*, float*, int)", CALLER, 27.0, 60.0),
        kernel("softmax_rows(float*, int)", CALLER, 87.0, 12.0),
        kernel("void at::native::elementwise_kernel<128, 2>(int, at::native::FillFunctor<float>)", CALLER, 99.0, 3.0),
        end_at=110.0,
    ))
    shares = trace.time_shares(forward.kernels, {"fused_bias_relu_kernel", "softmax_rows"})
    assert shares.total_us == pytest.approx(100.0)
    assert shares.own_fraction == pytest.approx(0.72) and shares.library_fraction == pytest.approx(0.28)
    assert shares.own_kernels == ["fused_bias_relu_kernel<float>", "softmax_rows"]
    assert [name for name, _ in shares.library][0] == "ampere_sgemm_128x64_tn"
    text = shares.describe()
    assert text.startswith("own kernels 72% of GPU time (2 kernels); library 28%: ampere_sgemm_128x64_tn 25%")
    note = shares.as_note()
    assert note["ownFraction"] == 0.72 and note["library"][0]["fraction"] == 0.25
    assert note["totalUs"] == 100.0


def test_a_pure_library_forward_has_no_own_share():
    shares = trace.time_shares([trace.StreamWork("sm90_xmma_gemm_f32f32", "kernel", CALLER, 0.0, 8.0)], set())
    assert shares.own_fraction == 0.0 and shares.library_fraction == 1.0
    assert shares.describe().startswith("own kernels 0% of GPU time (0 kernels); library 100%: sm90_xmma_gemm")


def test_own_kernel_names_match_whole_identifiers_never_library_kernels():
    assert trace.is_own_kernel("void relu_kernel<float>(float*)", {"relu_kernel"})
    assert trace.is_own_kernel("(anonymous namespace)::relu_kernel(float*)", {"relu_kernel"})
    assert trace.is_own_kernel("_Z11relu_kernelPf", {"relu_kernel"})  # a trace with mangled names
    assert not trace.is_own_kernel("leaky_relu_kernel_v2(float*)", {"relu_kernel"})
    # an ATen or cuBLAS kernel is library work even when the candidate reuses its name
    assert not trace.is_own_kernel("void at::native::vectorized_elementwise_kernel<4>(int)",
                                   {"vectorized_elementwise_kernel"})
    assert not trace.is_own_kernel("cutlass::Kernel2<my_gemm>(Params)", {"my_gemm"})


def test_the_hold_after_the_start_marker_is_not_the_forwards_work():
    # The harness holds the caller's stream (a sleep kernel right after the start marker) while the forward is
    # queued; the unjoined side GEMM then runs with the end marker and is caught.
    tr = profiled(kernel("at::cuda::(anonymous namespace)::spin_kernel(long)", CALLER, 2.5, 50.0),
                  kernel("side_gemm(float*)", SIDE, 52.6, 30.0), end_at=52.5)
    forward = trace.split_markers(trace.stream_work(tr), hold=True)
    assert forward is not None and [k.name for k in forward.kernels] == ["side_gemm(float*)"]
    assert forward.end_marker is not None and forward.end_marker.start == 52.5
    assert trace.side_stream_join(forward).joined is False
    unheld = trace.split_markers(trace.stream_work(tr))
    assert unheld is not None and len(unheld.kernels) == 2  # without hold=True the sleep counts as work


def test_the_staged_inputs_and_their_ready_marker_are_the_harness_s_but_early_side_work_is_the_forward_s():
    # After the hold the harness writes the inputs on the caller's stream (a copy) and queues a ready marker; a side
    # stream that does not wait for the caller's ran during the hold: its work stays the forward's.
    tr = profiled(kernel("at::cuda::(anonymous namespace)::spin_kernel(long)", CALLER, 2.5, 50.0),
                  kernel("side_gemm(float*)", SIDE, 3.0, 20.0),
                  kernel("Memcpy DtoD (Device -> Device)", CALLER, 52.6, 1.0, cat="gpu_memcpy"),
                  kernel(MARK, CALLER, 53.7, 1.0),
                  kernel("own_kernel(float*)", CALLER, 55.0, 5.0), end_at=61.0)
    forward = trace.split_markers(trace.stream_work(tr), hold=True, staged=True)
    assert forward is not None
    assert [w.name for w in forward.work] == ["side_gemm(float*)", "own_kernel(float*)"]
    assert forward.end_marker is not None and forward.end_marker.start == 61.0
    unstaged = trace.split_markers(trace.stream_work(tr), hold=True)
    assert unstaged is not None and len(unstaged.work) == 4  # without staged=True the copy and ready marker count


def test_a_hold_by_stream_wait_has_no_kernel_and_the_ready_marker_still_ends_the_harness_work():
    tr = profiled(kernel("side_gemm(float*)", SIDE, 1.0, 20.0),
                  kernel("Memcpy DtoD (Device -> Device)", CALLER, 40.0, 1.0, cat="gpu_memcpy"),
                  kernel(MARK, CALLER, 41.5, 1.0),
                  kernel("own_kernel(float*)", CALLER, 43.0, 5.0), end_at=49.0)
    forward = trace.split_markers(trace.stream_work(tr), hold=False, staged=True)
    assert forward is not None
    assert [w.name for w in forward.work] == ["side_gemm(float*)", "own_kernel(float*)"]


def test_the_harness_s_work_after_the_end_marker_is_not_the_forward_s_and_does_not_hide_the_marker():
    # run() reads checksums of held outputs after the call (int64 kernels on the caller's stream after the end
    # marker): the marker is still found, and an unjoined side GEMM still ends after it.
    tr = profiled(kernel("Memcpy DtoD (Device -> Device)", CALLER, 40.0, 1.0, cat="gpu_memcpy"),
                  kernel(MARK, CALLER, 41.5, 1.0),
                  kernel("side_gemm(float*)", SIDE, 42.0, 30.0),
                  kernel("void at::native::reduce_kernel<512, 1, ReduceOp<long>>(long*)", CALLER, 45.0, 2.0),
                  end_at=43.0)
    forward = trace.split_markers(trace.stream_work(tr), hold=False, staged=True)
    assert forward is not None and forward.end_marker is not None and forward.end_marker.start == 43.0
    assert [w.name for w in forward.work] == ["side_gemm(float*)"]
    assert trace.side_stream_join(forward).joined is False
