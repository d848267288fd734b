"""Holes found by the red-team round of 2026-11-25, each closed by a structural defence (no source is
recognised): the harness's own module state fingerprinted, the output contract on every timed call, the
candidate's process quiet while the reference is timed, a ring of kept output buffers, frames handed to the
candidate by standard-library helpers."""

from __future__ import annotations

import importlib.util
import random
import sys
import threading
import time

import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.integrity import AuditMonitor, IntegritySnapshot
from kforge_worker.checks.output_checks import check_output_contract
from kforge_worker.checks.static_scan import ScanReport
from kforge_worker.interference import IdleMeter
from kforge_worker.timed_inputs import OutputSampler


# ------------------------------------------------------------------ the harness's own module state
def test_a_rebound_harness_constant_is_a_fingerprint_change():
    """compare.NOISE_MULTIPLE raised to 1e12 made every comparison without float64 pass (a zeros answer timed
    at 82x came out correct): no function changed, so the function fingerprint saw nothing."""
    import kforge_worker.compare as compare

    snap = IntegritySnapshot.take()
    assert snap.diff() == []
    saved = compare.NOISE_MULTIPLE
    compare.NOISE_MULTIPLE = 1e12
    try:
        changes = snap.diff()
    finally:
        compare.NOISE_MULTIPLE = saved
    assert any("kforge_worker.compare.NOISE_MULTIPLE changed from 4.0 to 1000000000000.0" in c for c in changes)
    assert snap.diff() == []


def test_harness_objects_and_lazily_imported_modules_are_watched():
    """The clocks' bound primitives are an object's attributes, and the pipeline imports some harness modules
    only when first needed: both must be in the snapshot taken before the candidate's import."""
    import kforge_worker.timing as timing

    snap = IntegritySnapshot.take()
    assert "kforge_worker.interference.SHARE" in snap.harness_globals
    assert "kforge_worker.timed_inputs.OutputSampler" in snap.harness_globals
    saved = timing._PRIMITIVES.perf_counter
    timing._PRIMITIVES.perf_counter = lambda: 0.0
    try:
        assert any("kforge_worker.timing._PRIMITIVES" in c for c in snap.diff())
    finally:
        timing._PRIMITIVES.perf_counter = saved


def test_the_harness_own_run_state_is_not_a_change():
    """State the harness itself sets during a run (the trials' allowance, the paired dropout streams)."""
    import kforge_worker.compare as compare

    snap = IntegritySnapshot.take()
    noise = compare.reference_noise()
    compare.set_reference_noise(noise + 1e-6)
    context.pair_random_streams(True)
    try:
        assert snap.diff() == []
    finally:
        context.pair_random_streams(False)
        compare.set_reference_noise(noise)


# ------------------------------------------------------------------ the output contract on every timed call
class _Deferred(torch.Tensor):
    """A tensor subclass standing for an output computed only when read."""


def _sampler() -> OutputSampler:
    return OutputSampler(lambda cand, ref: (True, None), rng=random.Random(1))


def test_a_lazy_timed_output_fails_every_pair_sampled_or_not():
    sampler = _sampler()
    out = torch.Tensor._make_subclass(_Deferred, torch.zeros(4, 4))
    for pair in range(60):
        sampler.after_pair(pair, torch.zeros(4, 4), out)
    check = sampler.check(warmup_pairs=5)
    assert check["outcome"] == "fail" and check["failVerdict"] == "cheating"
    assert "_Deferred" in check["evidence"] and sampler.summary()["wrong"] == 60


def test_a_timed_output_written_over_its_input_fails_unless_the_reference_aliases_too():
    x = torch.rand(4, 4)
    aliased = _sampler()
    for pair in range(20):
        aliased.after_pair(pair, torch.zeros(4, 4), x.relu_(), [x])
    assert aliased.check(5)["outcome"] == "fail" and "shares storage with its input 0" in aliased.check(5)["evidence"]
    allowed = _sampler()  # the reference's outputs alias its inputs: None is passed for the inputs
    for pair in range(20):
        allowed.after_pair(pair, torch.zeros(4, 4), x.relu_(), None)
    own = _sampler()
    for pair in range(20):
        own.after_pair(pair, torch.zeros(4, 4), x.relu(), [x])
    assert allowed.check(5)["outcome"] == "pass" and own.check(5)["outcome"] == "pass"


# ------------------------------------------------------------------ quiet while the reference is timed
def test_a_thread_spinning_while_the_reference_is_timed_is_interference():
    """The worker only waits during a reference call; another thread burning CPU then is the candidate's."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    meter = IdleMeter()
    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        for _ in range(5):
            meter.measure(lambda: time.sleep(0.03))
    finally:
        stop.set()
        spinner.join()
    check = meter.check("PASSIVE")
    assert check["outcome"] == "fail" and check["failVerdict"] == "cheating", check["evidence"]
    # torch's own OpenMP team spins after every region when the user chose an active wait: not the candidate's
    assert meter.check("ACTIVE")["outcome"] == "warn"

    quiet = IdleMeter()
    for _ in range(5):
        quiet.measure(lambda: time.sleep(0.03))
    assert quiet.check()["outcome"] == "pass", quiet.check()["evidence"]


# ------------------------------------------------------------------ a ring of kept output buffers
class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 6)

    def forward(self, x):
        return torch.relu(self.fc(x))


class _Ring(_Linear):
    """Two kept buffers used in turn: call n's result is overwritten by call n+2."""

    def __init__(self) -> None:
        super().__init__()
        self.ring = [torch.empty(16, 6), torch.empty(16, 6)]
        self.turn = 0

    def forward(self, x):
        out = self.ring[self.turn]
        self.turn ^= 1
        torch.addmm(self.fc.bias, x, self.fc.weight.t(), out=out)
        return out.clamp_min_(0.0)


def _ctx(cand: nn.Module) -> context.VerifyContext:
    ref = _Linear()
    cand.load_state_dict(ref.state_dict(), strict=False)
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=lambda s: [torch.randn(16, 8)],
                                 device=torch.device("cpu"), atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(5))


def test_a_ring_of_kept_output_buffers_is_aliasing():
    results = {r.name: r for r in check_output_contract(_ctx(_Ring()))}
    assert results["output_aliasing"].outcome == "fail"
    assert "calls 1 and 3 is the same storage" in results["output_aliasing"].evidence
    honest = {r.name: r for r in check_output_contract(_ctx(_Linear()))}
    assert honest["output_aliasing"].outcome == "pass", honest["output_aliasing"].evidence


# ------------------------------------------------------------------ frames from standard-library helpers
_WALKER = '''
import logging
import traceback
from collections import namedtuple

Pair = namedtuple("Pair", "a b")
logging.getLogger("kforge_redteam_walker").debug("import")


def helper_frame():
    return logging.currentframe()


def walk_stack():
    return [f for f, _ in traceback.walk_stack(None)][:2]


def traceback_frame():
    try:
        raise RuntimeError("x")
    except RuntimeError as exc:
        return getattr(exc.__traceback__, "tb_" + "frame")


def honest():
    logging.getLogger("kforge_redteam_walker").warning("plain logging")
    try:
        raise RuntimeError("y")
    except RuntimeError:
        text = traceback.format_exc()
    return Pair(1, text)
'''


def test_frames_from_standard_library_helpers_are_audited_and_honest_use_is_not(tmp_path):
    path = tmp_path / "walker_candidate.py"
    path.write_text(_WALKER)
    monitor = AuditMonitor.install()
    monitor.watch(str(path))
    saved, monitor.active = monitor.active, True
    monitor.events.clear()
    try:
        spec = importlib.util.spec_from_file_location("kforge_redteam_walker", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # namedtuple at import: the stdlib names it from the caller's frame
        module.honest()
        assert monitor.events == [], [e.render() for e in monitor.events]
        for name in ("helper_frame", "walk_stack", "traceback_frame"):
            monitor.events.clear()
            getattr(module, name)()
            assert any(e.kind == "tamper" for e in monitor.events), name
    finally:
        monitor.active = saved
        monitor.events.clear()
        monitor.candidate_files.discard(str(path))
        sys.modules.pop("kforge_redteam_walker", None)


# ------------------------------------------------------------------ the reference process's scheduling
def test_the_reference_process_pinned_or_reniced_from_outside_is_interference():
    """The clean reference process is the worker's child: the candidate's process can pin it to one core or
    lower its priority (no signal, no harness file touched). Its scheduling is compared with how its main
    thread was scheduled when it started."""
    import os

    from kforge_worker.interference import scheduling, scheduling_change

    mine = scheduling(os.getpid())
    assert os.getpid() in mine
    cores, nice = mine[os.getpid()]
    assert scheduling_change((cores, nice), mine) is None
    if len(cores) > 1:
        pinned = {tid: (frozenset([min(cores)]), n) for tid, (_, n) in mine.items()}
        assert "may run on cores" in scheduling_change((cores, nice), pinned)
    bound = {i: (frozenset([c]), nice) for i, c in enumerate(sorted(cores))}  # an OpenMP binding: one core each
    assert scheduling_change((cores, nice), bound) is None
    if len(cores) > 1:  # an OpenMP binding asked for by the user pins the reference's own threads
        os.environ["OMP_PROC_BIND"] = "true"
        try:
            assert scheduling_change((cores, nice), {1: (frozenset([min(cores)]), nice)}) is None
        finally:
            del os.environ["OMP_PROC_BIND"]
    reniced = {tid: (a, n + 5) for tid, (a, n) in mine.items()}
    assert "reniced" in scheduling_change((cores, nice), reniced)
    meter = IdleMeter()
    meter.tampered = "the reference process's threads may run on cores [0], not [0, 1] as when it started"
    assert meter.check("PASSIVE")["outcome"] == "fail"
