"""Red team round 7 (bench/verify/NOTES.md, "Session 2026-11-29: red team round 7"): each test fails without its
defence. The judge's half of the timing defence is in test_verify_judge.py (candidate times handed over)."""

from __future__ import annotations

import ctypes
import ctypes.util

import torch

from kforge_worker.checks.integrity import IntegritySnapshot
from kforge_worker.checks.static_scan import scan_source


def test_denormals_flushed_and_left_fail_the_fingerprint_and_the_call_only_warns():
    snap = IntegritySnapshot.take()
    torch.set_flush_denormal(True)
    try:
        problems = snap.diff()
    finally:
        torch.set_flush_denormal(False)
    assert any("floating-point environment" in p for p in problems), problems
    assert snap.diff() == []
    source = ("import torch\n"
              "def forward(x):\n"
              "    torch.set_flush_denormal(True)\n"
              "    try:\n"
              "        return x * 2\n"
              "    finally:\n"
              "        torch.set_flush_denormal(False)\n")
    findings = [f for f in scan_source(source, "c.py").findings if "set_flush_denormal" in f.message]
    assert len(findings) == 2 and all(f.severity == "warn" for f in findings), findings


def test_a_rounding_mode_set_from_native_code_fails_the_fingerprint():
    libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    fe_upward = 0x800  # x86-64 <fenv.h>
    snap = IntegritySnapshot.take()
    assert libm.fesetround(fe_upward) == 0
    try:
        problems = snap.diff()
    finally:
        libm.fesetround(0)
    assert any("floating-point environment" in p for p in problems), problems
    assert snap.diff() == []


def test_a_signal_handler_spinning_on_the_waiting_thread_is_interference():
    import signal
    import time

    from kforge_worker.interference import IdleMeter

    def spin(signum, frame):
        until = time.perf_counter() + 0.004
        while time.perf_counter() < until:
            pass

    def waited_for_reference() -> None:  # the worker blocked on the reply while the reference process is timed
        time.sleep(0.006)

    quiet, busy = IdleMeter(), IdleMeter()
    for _ in range(10):
        quiet.measure(waited_for_reference)
    previous = signal.signal(signal.SIGALRM, spin)
    try:
        for _ in range(10):
            signal.setitimer(signal.ITIMER_REAL, 0.0005)  # armed by the candidate's forward, fires during the wait
            busy.measure(waited_for_reference)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert quiet.check()["outcome"] == "pass", quiet.check()
    verdict = busy.check()
    assert verdict["outcome"] == "fail" and "waiting thread itself" in verdict["evidence"], verdict


def test_a_signal_handler_or_timer_left_by_a_timed_call_is_seen_and_none_when_restored():
    import signal

    from kforge_worker.interference import hook_change, hook_state

    baseline = hook_state()
    previous = signal.signal(signal.SIGALRM, lambda *_: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        change = hook_change(baseline)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert change is not None and "SIGALRM" in change and "interval timer 0 armed" in change, change
    assert hook_change(baseline) is None


def test_a_reference_output_written_by_the_candidate_during_a_check_is_found():
    from torch import nn

    from kforge_worker.checks import context, sealed

    held = {}

    class Reference(nn.Module):
        def forward(self, x):
            return torch.exp(x)

    class Mirror(nn.Module):  # copies its own (wrong) answer into the reference's, as a frame walk would
        def forward(self, x):
            out = torch.zeros_like(x)
            held["ref_out"].copy_(out)
            return out

    class Honest(nn.Module):
        def forward(self, x):
            return torch.exp(x)

    ref = Reference()
    sealed.register_reference(ref)
    sealed.take_broken()
    x = torch.rand(4, 8)
    held["ref_out"] = context.run(ref, [x.clone()])
    assert torch.equal(context.run(Honest(), [x.clone()]), held["ref_out"])
    assert sealed.take_broken() == []
    context.run(Mirror(), [x.clone()])
    found = sealed.take_broken()
    assert len(found) == 1 and "written during a candidate call" in found[0], found
    del held["ref_out"]  # no longer held: no longer sealed
    assert sealed.checksums() == []


def test_a_profile_function_left_by_a_timed_call_is_seen():
    import sys

    from kforge_worker.interference import hook_change, hook_state

    baseline = hook_state()
    sys.setprofile(lambda frame, event, arg: None)
    try:
        change = hook_change(baseline)
    finally:
        sys.setprofile(None)
    assert change is not None and "profile function" in change, change
    assert hook_change(baseline) is None


def test_a_dispatch_mode_left_on_the_stack_by_a_timed_call_is_seen():
    from torch.utils._python_dispatch import TorchDispatchMode

    from kforge_worker.interference import hook_change, hook_state

    class Watching(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    baseline = hook_state()
    mode = Watching()
    mode.__enter__()  # entered in forward and left there: sees the harness's copy_ of the next inputs
    try:
        change = hook_change(baseline)
    finally:
        mode.__exit__(None, None, None)
    assert change is not None and "dispatch mode" in change, change
    assert hook_change(baseline) is None


def test_a_candidate_call_in_a_check_that_leaves_a_profile_function_is_found():
    import sys

    from torch import nn

    from kforge_worker.checks import context, sealed

    class Leaves(nn.Module):  # its hook would run where the check compares it with the reference
        def forward(self, x):
            sys.setprofile(lambda frame, event, arg: None)
            return x * 2

    sealed.take_broken()
    try:
        context.run(Leaves(), [torch.rand(3)])
    finally:
        sys.setprofile(None)
    found = sealed.take_broken()
    assert len(found) == 1 and "profile function" in found[0], found
    context.run(nn.Identity(), [torch.rand(3)])
    assert sealed.take_broken() == []
