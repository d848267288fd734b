"""Holes found by the red-team rounds of 2026-11-25 (1 and 3; round 2 is test_verify_redteam2.py), each closed by
a structural defence (no source is recognised): the harness's own module state fingerprinted, the output contract
on every timed call, the candidate's process quiet while the reference is timed, a ring of kept output buffers,
frames handed to the candidate by standard-library helpers; then the verdict sealed before it is written, walks
refused, the dispatcher and the imported files fingerprinted, the state after the timed calls compared."""

from __future__ import annotations

import importlib.util
import os
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
        from kforge_worker.checks.integrity import WalkRefused

        for name in ("helper_frame", "walk_stack", "traceback_frame"):
            monitor.events.clear()
            try:  # refused since round 3, and recorded
                getattr(module, name)()
            except WalkRefused:
                pass
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
    cores, nice = mine[os.getpid()][:2]  # (cores, niceness, policy) since round 4
    assert scheduling_change((cores, nice), mine) is None
    if len(cores) > 1:
        pinned = {tid: (frozenset([min(cores)]), n) for tid, (_, n, *_) in mine.items()}
        assert "may run on cores" in scheduling_change((cores, nice), pinned)
    bound = {i: (frozenset([c]), nice) for i, c in enumerate(sorted(cores))}  # an OpenMP binding: one core each
    assert scheduling_change((cores, nice), bound) is None
    if len(cores) > 1:  # an OpenMP binding asked for by the user pins the reference's own threads
        os.environ["OMP_PROC_BIND"] = "true"
        try:
            assert scheduling_change((cores, nice), {1: (frozenset([min(cores)]), nice)}) is None
        finally:
            del os.environ["OMP_PROC_BIND"]
    reniced = {tid: (a, n + 5) for tid, (a, n, *_) in mine.items()}
    assert "reniced" in scheduling_change((cores, nice), reniced)
    meter = IdleMeter()
    meter.tampered = "the reference process's threads may run on cores [0], not [0, 1] as when it started"
    assert meter.check("PASSIVE")["outcome"] == "fail"


# ====================================================================== red team round 3 (2026-11-25)
# Code the candidate leaves behind to run after the verdict (an import finder, an audit hook, a wrapped
# serialiser, a walk to the channel), kernels registered over the operators the worker's copy of the reference
# runs, files the harness and the reference process import, state the timed loop leaves behind.
_ROUND3 = '''
import sys


def add_hook():
    sys.addaudithook(lambda event, args: None)
'''


def _corpus():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("kforge_verify_corpus", os.path.join(root, "test", "verify",
                                                                                       "corpus.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return root, module


def _through_the_worker(candidate: str, problem: str = "tiny_linear_relu", time: bool = False):
    root, corpus = _corpus()
    entry = {"id": candidate, "problem": f"test/verify/problems/{problem}.py",
             "candidate": f"test/verify/candidates/{candidate}.py", "time": time}
    return corpus.run_entry(entry, "cpu")


def test_an_import_finder_left_behind_cannot_rewrite_the_verdict():
    """A finder put on sys.meta_path at import ran when the worker imported its schema check after deciding the
    verdict, walked up to the result dict and made a zeros stub `correct`. The finder is now seen and taken out
    after the import, and the result line goes out before anything else is imported."""
    outcome = _through_the_worker("adv_import_hook_rewrite")
    assert outcome.verdict == "cheating" and "harness_integrity" in outcome.failing, outcome.reason
    integrity = next(c for c in outcome.result["checks"] if c["name"] == "harness_integrity")
    assert "sys.meta_path gained _LateFinder (taken out again)" in integrity["evidence"]


def test_import_finders_and_path_hooks_are_taken_out_when_seen():
    snap = IntegritySnapshot.take()
    finder = type("_Finder", (), {"find_spec": staticmethod(lambda *a, **k: None)})()
    hook = lambda path: None  # noqa: E731
    sys.meta_path.insert(0, finder)
    sys.path_hooks.append(hook)
    try:
        changes = snap.diff(thorough=False)
    finally:
        for table, entry in ((sys.meta_path, finder), (sys.path_hooks, hook)):
            if entry in table:
                table.remove(entry)
    assert any("sys.meta_path gained _Finder (taken out again)" in c for c in changes), changes
    assert any("sys.path_hooks gained" in c for c in changes), changes
    assert finder not in sys.meta_path and hook not in sys.path_hooks
    assert snap.diff(thorough=False) == []


def test_a_finder_an_installed_library_adds_is_not_a_change():
    """setuptools' distutils finder, six's importer: an honest candidate importing such a library adds one."""
    from _distutils_hack import DistutilsMetaFinder

    snap = IntegritySnapshot.take()
    finder = DistutilsMetaFinder()
    sys.meta_path.append(finder)
    try:
        assert snap.diff(thorough=False) == []
        assert finder in sys.meta_path
    finally:
        sys.meta_path.remove(finder)


def test_an_audit_hook_added_by_the_candidate_is_refused_and_recorded(tmp_path):
    """An audit hook of the candidate's runs on every later event — after the verdict too (a zeros stub came out
    `correct`). The harness's own hook refuses it while the candidate's code is on the stack."""
    path = tmp_path / "hook_candidate.py"
    path.write_text(_ROUND3)
    monitor = AuditMonitor.install()
    monitor.watch(str(path))
    monitor.events.clear()
    try:
        spec = importlib.util.spec_from_file_location("kforge_redteam_hook", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.add_hook()  # suppressed by the interpreter: the hook is simply not added
        assert any(e.event == "sys.addaudithook" and e.kind == "tamper" for e in monitor.events)
    finally:
        monitor.events.clear()
        monitor.candidate_files.discard(str(path))
        sys.modules.pop("kforge_redteam_hook", None)


def test_an_audit_hook_left_behind_cannot_rewrite_the_verdict():
    outcome = _through_the_worker("adv_audit_hook_rewrite")
    assert outcome.verdict == "cheating" and "runtime_audit" in outcome.failing, outcome.reason


def test_a_kernel_registered_over_an_aten_operator_is_a_fingerprint_change():
    """A CPU kernel registered over aten::relu made the worker's copy of the reference agree with a candidate
    wrong above the benchmark's sizes, so extra_shapes passed it. The candidate's own operators are not watched."""
    snap = IntegritySnapshot.take()
    own = torch.library.Library("kforge_redteam_own", "DEF")
    own.define("twice(Tensor x) -> Tensor")
    own.impl("twice", lambda x: x * 2, "CPU")
    assert snap.diff() == []
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("relu", lambda x: x.clamp_min(0), "CPU")
    try:
        changes = snap.diff()
    finally:
        lib._destroy()
        own._destroy()
    assert any("a kernel was registered over aten::relu for CPU" in c for c in changes), changes
    assert snap.diff() == []


def test_a_kernel_registered_above_the_backend_is_a_fingerprint_change_too():
    snap = IntegritySnapshot.take()
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("_softmax", lambda x, dim, half: x, "AutogradCPU")
    try:
        changes = snap.diff()
    finally:
        lib._destroy()
    assert any("over aten::_softmax for AutogradCPU" in c for c in changes), changes


def test_files_the_harness_or_the_reference_process_imports_are_watched(tmp_path):
    """The clean reference process imports harness modules after the candidate's import, and every later run
    imports the tree again: a candidate appended code to a harness module and nothing noticed. A module or .pth
    created in an import path is a change too; a scratch file that Python cannot import is not."""
    problem = tmp_path / "problem.py"
    problem.write_text("x = 1\n")
    sys.path.append(str(tmp_path))
    try:
        snap = IntegritySnapshot.take(files=(str(problem),))
        (tmp_path / "autotune.json").write_text("{}")
        assert snap.diff() == []
        (tmp_path / "json.py").write_text("")
        problem.write_text("x = 1\n")  # the same bytes: written all the same
        changes = snap.diff()
    finally:
        sys.path.remove(str(tmp_path))
    assert any(c.endswith("json.py was created") for c in changes), changes
    assert any(c.endswith("problem.py was written") for c in changes), changes
    from kforge_worker.checks import process_hooks

    harness = process_hooks.watched_files()
    assert any(p.endswith(os.path.join("kforge_worker", "timed_inputs.py")) for p in harness)


def test_files_written_beside_the_candidate_count_only_once_imported_or_shadowing(tmp_path):
    """kforge optimize on several GPUs writes each problem's file into one folder while another problem's file
    from that folder is judged: every such write was `cheating` (harness_integrity, "...was written"). A
    neighbour nothing imports and whose name shadows no module is not a way in; one the candidate imports, or one
    named like a module imported elsewhere, still is."""
    import importlib

    candidate = tmp_path / "a_new.py"
    candidate.write_text("x = 1\n")
    (tmp_path / "helper_kf_sibling.py").write_text("y = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("helper_kf_sibling")
        snap = IntegritySnapshot.take(files=(str(candidate),))
        (tmp_path / "b_new.py").write_text("z = 1\n")  # another problem's file, written meanwhile
        assert snap.diff() == []
        (tmp_path / "helper_kf_sibling.py").write_text("y = 2\n")  # a module the candidate imported
        (tmp_path / "numpy.py").write_text("")  # would shadow an installed library
        (tmp_path / "later_kf_module.py").write_text("")
        importlib.import_module("later_kf_module")  # written, then imported
        changes = snap.diff()
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("helper_kf_sibling", "later_kf_module"):
            sys.modules.pop(name, None)
    assert not any("b_new.py" in c for c in changes), changes
    assert any(c.endswith("helper_kf_sibling.py was written") for c in changes), changes
    assert any(c.endswith("numpy.py was created") for c in changes), changes
    assert any(c.endswith("later_kf_module.py was created") for c in changes), changes


def test_replaced_functions_are_put_back_before_the_result_is_serialised():
    """json.dumps (or JSONEncoder.encode) wrapped at import rewrote the result message on its way out: the
    fingerprint named the wrapper inside the very result the wrapper rewrote. The seal puts back everything
    the fingerprint watches, and the serialiser's own classes are watched."""
    import json
    import json.encoder

    snap = IntegritySnapshot.take()
    dumps, encode = json.dumps, json.encoder.JSONEncoder.encode
    json.dumps = lambda *a, **k: "{}"
    json.encoder.JSONEncoder.encode = lambda self, o: "{}"
    try:
        changes = snap.diff(thorough=False)
        snap.restore()
        assert json.dumps is dumps and json.encoder.JSONEncoder.encode is encode
    finally:
        json.dumps, json.encoder.JSONEncoder.encode = dumps, encode
    assert any(c.startswith("json.dumps was replaced") for c in changes), changes
    assert any(c.startswith("json.encoder.JSONEncoder.encode was replaced") for c in changes), changes
    assert snap.diff(thorough=False) == []


def test_a_wrapped_serialiser_cannot_rewrite_the_verdict():
    outcome = _through_the_worker("adv_json_dumps_rewrite")
    assert outcome.verdict == "cheating" and "harness_integrity" in outcome.failing, outcome.reason


_WALKS = '''
import gc
import sys


def frame():
    return sys._getframe(1)


def live_objects():
    return len(gc.get_objects())
'''


def test_walks_over_frames_and_live_objects_are_refused_during_and_after_the_run(tmp_path):
    """A walk hands the candidate the harness's objects (the result, the channel, the audit record itself):
    recording it was not enough — the walker rewrote what was recorded. It is refused, and still refused once
    the monitor stops recording (after the verdict)."""
    from kforge_worker.checks.integrity import WalkRefused

    path = tmp_path / "walks_candidate.py"
    path.write_text(_WALKS)
    monitor = AuditMonitor.install()
    monitor.watch(str(path))
    saved, monitor.active = monitor.active, True
    monitor.events.clear()
    try:
        spec = importlib.util.spec_from_file_location("kforge_redteam_walks", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in ("frame", "live_objects"):
            try:
                getattr(module, name)()
            except WalkRefused:
                pass
            else:
                raise AssertionError(f"{name} was not refused")
        assert len([e for e in monitor.events if "refused" in e.detail]) == 2
        monitor.active = False
        monitor.events.clear()
        try:
            module.frame()
        except WalkRefused:
            pass
        else:
            raise AssertionError("a walk after the run was not refused")
        assert monitor.events == []
        assert sys._getframe(0) is not None  # the harness's own walks are its business
    finally:
        monitor.active = saved
        monitor.events.clear()
        monitor.candidate_files.discard(str(path))
        sys.modules.pop("kforge_redteam_walks", None)


def test_a_channel_found_among_live_objects_cannot_edit_the_result_line():
    """gc.get_objects() at import (inside try/except) found the protocol channel; a wrapper around its stream
    edited the result line, nonce and all — the walk was recorded in the line it rewrote. Refused now."""
    outcome = _through_the_worker("adv_channel_stream_swap")
    assert outcome.verdict == "cheating" and "runtime_audit" in outcome.failing, outcome.reason
    audit = next(c for c in outcome.result["checks"] if c["name"] == "runtime_audit")
    assert "refused" in audit["evidence"]


def test_buffers_after_the_timed_calls_must_be_the_reference_buffers():
    """A training-mode BatchNorm that stops updating its running statistics once timed: every timed output is
    right (batch statistics), the skipped work is never compared. After the timing both sides have seen the
    same inputs, one call each per pair: the buffers must agree."""
    from kforge_worker.timed_state import timed_state_check

    torch.manual_seed(0)
    ref, cand = nn.BatchNorm1d(8), nn.BatchNorm1d(8)
    cand.register_buffer("own_cache", torch.zeros(3))  # a candidate's own buffer: not the reference's, not compared
    for _ in range(5):
        x = torch.randn(16, 8)
        ref(x)
        cand(x)
    reference = {k: v.clone() for k, v in ref.named_buffers()}
    assert timed_state_check(reference, cand, 1e-4, 1e-4)["outcome"] == "pass"
    ref(torch.randn(16, 8))  # one more call on the reference's side only: the candidate skipped its update
    skipped = timed_state_check({k: v.clone() for k, v in ref.named_buffers()}, cand, 1e-4, 1e-4)
    assert skipped["outcome"] == "fail" and "running_mean" in skipped["evidence"], skipped
    assert timed_state_check({}, cand, 1e-4, 1e-4)["outcome"] == "skip"


def test_a_side_effect_skipped_while_timed_is_cheating():
    outcome = _through_the_worker("adv_timed_skip_stats", "tiny_linear_bn_softmax", time=True)
    assert outcome.verdict == "cheating" and "timed_state" in outcome.failing, outcome.reason
