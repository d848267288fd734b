"""Unit tests of the runtime pieces that do not need a candidate process: roofline, integrity, verdicts."""

from __future__ import annotations

import time

import torch

from kforge_worker.checks.integrity import IntegritySnapshot, ThreadCount
from kforge_worker.checks.result import failed, passed, verdict_from_checks
from kforge_worker.checks.roofline import Floor, check_roofline, ceilings_for, count_flops
from kforge_worker.checks import selected_checks


def test_roofline_flags_times_below_the_floor_only():
    # the seed attention problem: 1.1 TFLOP, 4.3 GB (Q, K, V, O at 1 GiB each)
    floor = Floor(4 * 32 * 32 * 512 * 512 * 1024, 4 * 2**30, *ceilings_for("NVIDIA H100 80GB HBM3"))
    assert 1.2 < floor.ms < 1.5
    assert check_roofline(0.05, floor, "NVIDIA H100").outcome == "fail"
    assert check_roofline(1.8, floor, "NVIDIA H100").outcome == "pass"
    assert check_roofline(1.8, None, "Some GPU").outcome == "skip"
    assert check_roofline(None, floor, "NVIDIA H100").outcome == "skip"


def test_flop_count_of_a_linear_layer():
    model = torch.nn.Linear(64, 32)
    assert count_flops(model, [torch.rand(8, 64)]) == 2 * 8 * 64 * 32


def test_integrity_snapshot_sees_patched_functions_and_flags():
    snap = IntegritySnapshot.take()
    assert snap.diff() == []
    original = torch.allclose
    flag = torch.get_float32_matmul_precision()
    try:
        torch.allclose = lambda *a, **k: True
        torch.set_float32_matmul_precision("medium")
        problems = snap.diff()
    finally:
        torch.allclose = original
        torch.set_float32_matmul_precision(flag)
    assert any("torch.allclose was replaced" in p for p in problems)
    assert any("float32_matmul_precision" in p for p in problems)
    assert snap.diff() == []


def test_thread_count_sees_a_background_thread():
    import threading

    before = ThreadCount.now()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, daemon=True)
    t.start()
    try:
        assert ThreadCount.now().python == before.python + 1
    finally:
        stop.set()
        t.join()
    time.sleep(0.01)
    assert ThreadCount.now().python == before.python


def test_cheating_outranks_incorrect_and_passes_decide_nothing():
    checks = [passed("a", "x"), failed("b", "y", "incorrect"), failed("c", "z", "cheating")]
    verdict, check = verdict_from_checks(checks)
    assert verdict == "cheating" and check.name == "c"
    assert verdict_from_checks([passed("a", "x")]) == (None, None)


def test_check_selection_from_the_request():
    assert selected_checks([]) == selected_checks(["all"])  # protocol default: everything
    assert "ops" not in selected_checks(["-ops"]) and "state" in selected_checks(["-ops"])
    assert selected_checks(["all"]) == selected_checks(["-nothing"])
    assert selected_checks(["none"]) == []
    assert sorted(selected_checks(["state", "replay"])) == ["replay", "state"]
