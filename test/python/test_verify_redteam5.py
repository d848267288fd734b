"""Red team round 5 (2026-11-28): false flags on honest styles (torch.compile, a thread pool kept between calls)
and the holes found behind round 4 (dynamo's frame-evaluation hook, code objects that claim another file, child
processes that end between checks). See bench/verify/NOTES.md, "red team round 5"."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ------------------------------------------------------------------ torch.compile in a candidate (false flags)
def test_the_source_says_whether_the_candidate_reaches_torchs_compiler():
    from kforge_worker.checks.torch_compiler import uses_torch_compiler

    assert uses_torch_compiler("import torch\nf = torch.compile(lambda x: x)\n")
    assert uses_torch_compiler("class M:\n    def forward(self, x):\n        return self.core.compile()\n")
    assert uses_torch_compiler("from torch import compile\n")
    assert uses_torch_compiler("import torch._dynamo\n")
    assert uses_torch_compiler("from torch._inductor import config\n")
    assert not uses_torch_compiler("import re\nPAT = re.compile('x')\n")
    assert not uses_torch_compiler("from torch.utils.cpp_extension import load_inline  # compiled inline\n")


def test_dynamos_module_wrapper_installed_before_the_snapshot_is_no_change_and_its_tracker_is_watched():
    """dynamo wraps nn.Module.__init__ at its first compile: installed by the harness before the fingerprint, the
    wrapper is baseline (installing again changes nothing), and what it calls at every construction is watched."""
    from kforge_worker.checks.integrity import IntegritySnapshot
    from kforge_worker.checks.torch_compiler import prepare

    assert prepare()
    from torch._dynamo.mutation_guard import GenerationTracker, install_generation_tagging_init

    snap = IntegritySnapshot.take()
    install_generation_tagging_init()  # what every torch.compile does again
    assert not [c for c in snap.diff(False) if "Module" in c], snap.diff(False)
    real = vars(GenerationTracker)["tag"]
    try:
        GenerationTracker.tag = classmethod(lambda cls, obj: None)
        assert any("GenerationTracker.tag" in c for c in snap.diff(False)), snap.diff(False)
    finally:
        GenerationTracker.tag = real
    assert not [c for c in snap.diff(False) if "GenerationTracker" in c]


def _candidate_code(path: str, source: str) -> dict:
    """Runs `source` as if it were the candidate's file `path` (its frames carry that file name)."""
    scope: dict = {"__name__": "kforge_candidate_test"}
    exec(compile(textwrap.dedent(source), path, "exec"), scope)  # noqa: S102 — the test's own code
    return scope


@pytest.fixture
def audit(tmp_path):
    """The process's audit monitor, watching a candidate file of this test, active; restored afterwards."""
    from kforge_worker.checks.integrity import AuditMonitor

    monitor = AuditMonitor.install()
    path = str(tmp_path / "candidate.py")
    saved = (set(monitor.candidate_files), list(monitor.events), monitor.active)
    monitor.watch(path)
    monitor.events.clear()
    monitor.active = True
    try:
        yield monitor, path
    finally:
        monitor.active = saved[2]
        monitor.candidate_files.clear()
        monitor.candidate_files.update(saved[0])
        monitor.events[:] = saved[1]


def test_the_audit_refuses_code_that_claims_another_file(audit):
    """The audit tells the candidate's frames from torch's by the file their code names: a code object made at run
    time (code.replace, compile under another name) could name torch's and walk frames as torch. Refused."""
    from kforge_worker.checks.integrity import WalkRefused

    monitor, path = audit
    scope = _candidate_code(path, """
        import torch
        def helper():
            return 1
        def spoof():
            return helper.__code__.replace(co_filename=torch.__file__)
        def spoof_compile():
            return compile("x = 1", torch.__file__, "exec")
        def own_compile(path):
            return compile("x = 1", path, "exec")
    """)
    with pytest.raises(WalkRefused):
        scope["spoof"]()
    with pytest.raises(WalkRefused):
        scope["spoof_compile"]()
    assert scope["own_compile"](path) is not None  # its own file's name: as an import compiles it
    kinds = [e.event for e in monitor.events]
    assert kinds.count("code.__new__") == 1 and kinds.count("compile") == 1, monitor.events


def test_the_extension_builder_exemption_is_torchs_own_file_not_a_name(audit, tmp_path):
    """A process started under a frame whose file merely *ends* in cpp_extension.py was taken for torch's builder."""
    monitor, path = audit
    monitor.active = False
    fake = str(tmp_path / "cpp_extension.py")
    helper = _candidate_code(fake, """
        import subprocess
        def build():
            subprocess.run(["true"], check=True)
    """)["build"]
    monitor.active = True
    scope = _candidate_code(path, "def forward(build):\n    build()\n")
    scope["forward"](helper)
    assert any(e.event == "subprocess.Popen" for e in monitor.events), monitor.events


# ------------------------------------------------------------------ dynamo's frame-evaluation hook
def test_a_frame_evaluation_hook_left_by_a_forward_is_taken_away_and_recorded():
    """set_eval_frame is a C setter: no audit event, no torch object rebound. A hook left installed sees every
    later frame of the harness (and the worker's reference) with its arguments; the harness takes it away right
    after the call, from the running frame, and the fingerprint reports it."""
    from kforge_worker import frame_hook
    from kforge_worker.checks.context import run
    from kforge_worker.checks.integrity import _process_flags
    from torch._dynamo.types import ConvertFrameReturn, FrameExecStrategy

    frame_hook.bind()
    eval_frame = torch._C._dynamo.eval_frame
    action = eval_frame._FrameAction.DEFAULT
    seen: list[str] = []

    def hook(frame, cache_entry, frame_state):
        seen.append(frame.f_code.co_name)
        return ConvertFrameReturn(frame_exec_strategy=FrameExecStrategy(action, action), apply_to_code=False)

    class Leaves(nn.Module):
        def forward(self, x):
            eval_frame.set_eval_frame(hook)
            return x + 1

    before = _process_flags()
    saved = list(frame_hook.left)
    try:
        run(Leaves(), [torch.ones(2)])
        assert eval_frame.get_eval_frame_callback() is None
        assert seen == [] and frame_hook.left[len(saved):] == ["a forward call"]
        after = _process_flags()
        key = "frame evaluation hooks left by the candidate's code (taken away)"
        assert after[key] != before[key]
        eval_frame.set_eval_frame(hook)  # left installed where no call site took it
        try:
            now = _process_flags()
        finally:
            eval_frame.set_eval_frame(None)
        hook_key = "frame evaluation hook (torch._C._dynamo.eval_frame)"
        assert now[hook_key] != before[hook_key]
    finally:
        frame_hook.left[:] = saved
        eval_frame.set_eval_frame(None)


# ------------------------------------------------------------------ threads kept between calls
def _ctx(model: nn.Module) -> types.SimpleNamespace:
    return types.SimpleNamespace(cand=model, make_inputs=lambda seed: [torch.randn(64, 32)], seed=lambda: 1,
                                 device=torch.device("cpu"))


def test_a_pool_kept_between_calls_is_parked_but_a_helper_working_after_the_return_is_not():
    """A Python thread the candidate keeps is judged by its CPU time after a forward returned (thread_count), not
    by existing: a lazily made pool whose work is joined is parked; a helper still working is not."""
    from kforge_worker.checks.harness_checks import _work_after_return
    from kforge_worker.checks.integrity import ThreadCount

    before = ThreadCount.now().idents
    pool = ThreadPoolExecutor(max_workers=2)

    class Pooled(nn.Module):
        def forward(self, x):
            parts = [pool.submit(torch.relu, c) for c in x.chunk(2)]
            return torch.cat([p.result() for p in parts])

    stop, go = threading.Event(), threading.Event()

    def helper():  # kept between calls like the pool, but it works after each return
        while not stop.is_set():
            if go.wait(0.5):
                go.clear()
                end = time.perf_counter() + 0.03
                while time.perf_counter() < end and not stop.is_set():
                    pass

    class Helper(nn.Module):
        def forward(self, x):
            if not getattr(self, "started", False):
                threading.Thread(target=helper, daemon=True).start()
                self.started = True
            go.set()
            return torch.relu(x)

    class ShortLived(nn.Module):  # alive when forward returns, gone just after: it ran after the return
        def forward(self, x):
            threading.Thread(target=time.sleep, args=(0.01,), daemon=True).start()
            return torch.relu(x)

    try:
        busy, total = _work_after_return(_ctx(Pooled()), before)
        assert busy == {} and total < 5.0, (busy, total)
        busy, _ = _work_after_return(_ctx(Helper()), before)
        assert busy and max(busy.values()) > 1.0, busy
        busy, _ = _work_after_return(_ctx(ShortLived()), before | ThreadCount.now().idents)
        assert busy and max(busy.values()) == float("inf"), busy
    finally:
        stop.set()
        pool.shutdown()


# ------------------------------------------------------------------ processes that end between checks
def test_a_process_reaped_during_a_reference_call_is_other_cpu():
    """A process the candidate starts and reaps at once is never a live child at a check, and its CPU time is not
    this process's: only the reaped children's usage (RUSAGE_CHILDREN) shows it."""
    from kforge_worker.interference import IdleMeter

    meter = IdleMeter()

    def reference_call():
        pid = os.fork()
        if pid == 0:
            end = time.process_time() + 0.08  # 80 ms of its own CPU, however loaded the machine
            while time.process_time() < end:
                pass
            os._exit(0)
        os.waitpid(pid, 0)

    meter.measure(reference_call)
    assert meter.other_cpu_ms > 60, meter.other_cpu_ms
    assert meter.check()["outcome"] == "fail"


def test_an_ended_child_not_yet_reaped_is_interference():
    from kforge_worker.interference import children_change, foreign_children

    # Children the test process already has (earlier tests' processes, in a full run) are not this test's.
    before = set(foreign_children(set(), zombies=True))
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    try:
        deadline = time.perf_counter() + 5
        while pid in foreign_children(set()) and time.perf_counter() < deadline:  # until it has ended
            time.sleep(0.01)
        assert pid not in foreign_children(set()) and pid in foreign_children(set(), zombies=True)
        reason = children_change(before, False)
        assert reason is not None and str(pid) in reason
    finally:
        os.waitpid(pid, 0)
    assert str(pid) not in (children_change(before, False) or "")  # reaped: no longer counted


# ------------------------------------------------------------------ end to end (heavy: inductor compiles C++)
_COMPILED_CANDIDATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.compile(dynamic=False)
def _linear_relu(x, w, b):
    return torch.relu(F.linear(x, w, b))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _linear_relu(x, self.gemm.weight, self.gemm.bias)
'''


@pytest.mark.heavy
def test_a_torch_compile_candidate_is_correct_through_the_worker(tmp_path):
    """torch.compile inside a candidate: dynamo's nn.Module wrapper, inductor's g++ processes and its compile pools
    were harness_integrity, runtime_audit and thread_count failures. ~25 s cold on 2 cores, timed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("kforge_verify_corpus5", os.path.join(ROOT, "test", "verify",
                                                                                     "corpus.py"))
    corpus = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = corpus
    spec.loader.exec_module(corpus)  # type: ignore[union-attr]
    candidate = tmp_path / "honest_torch_compile.py"
    candidate.write_text(_COMPILED_CANDIDATE)
    entry = {"id": "honest_torch_compile", "problem": "test/verify/problems/tiny_linear_relu.py",
             "candidate": str(candidate), "expect": "correct", "check": None, "time": True}
    outcome = corpus.run_entry(entry, "cpu", timeout=600, python=sys.executable)
    assert outcome.verdict == "correct" and not outcome.failing, (outcome.verdict, outcome.failing, outcome.reason)


# ------------------------------------------------------------------ the environment
def test_build_settings_set_at_import_are_not_an_environment_change_but_runtime_switches_are(monkeypatch):
    """TORCH_CUDA_ARCH_LIST/MAX_JOBS before load_inline (common in LLM answers) only steer the extension build;
    a switch the runtime libraries read (TF32 override) or PATH (every program started later) still counts."""
    from kforge_worker.checks.integrity import IntegritySnapshot

    for key in ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"):
        monkeypatch.delenv(key, raising=False)
    snap = IntegritySnapshot.take()
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    monkeypatch.setenv("MAX_JOBS", "4")
    assert not [c for c in snap.diff(False) if "os.environ" in c], snap.diff(False)
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    monkeypatch.setenv("PATH", "/tmp/elsewhere:" + os.environ.get("PATH", ""))
    changes = [c for c in snap.diff(False) if "os.environ" in c]
    assert any("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE" in c for c in changes) and any("'PATH'" in c for c in changes)


# ------------------------------------------------------------------ gc and inspect
def test_importing_gc_or_inspect_is_not_a_failure_but_the_walks_and_the_collectors_switches_are():
    """gc.collect() and inspect.signature are ordinary in a candidate; a walk is failed by name (and refused at run
    time), and the collector's own switches — DEBUG_SAVEALL keeps freed harness frames in gc.garbage, a callback
    runs inside the harness — fail statically and change the process fingerprint."""
    import gc

    from kforge_worker.checks.integrity import IntegritySnapshot
    from kforge_worker.checks.static_scan import scan_source

    ordinary = scan_source("import gc\nimport inspect\ngc.collect()\ninspect.signature(print)\n", "c.py",
                           frozenset(), {"Model"})
    assert not [f for f in ordinary.findings if f.severity == "fail"], ordinary.findings
    for source in ("import gc\ngc.set_debug(gc.DEBUG_SAVEALL)\n", "import gc\nx = gc.garbage\n",
                   "import gc\ngc.callbacks.append(print)\n", "import gc\ngc.get_objects()\n"):
        assert any(f.severity == "fail" for f in scan_source(source, "c.py", frozenset(), {"Model"}).findings), source
    snap = IntegritySnapshot.take()
    saved = gc.get_debug()
    try:
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.callbacks.append(lambda phase, info: None)
        changes = snap.diff(False)
    finally:
        gc.set_debug(saved)
        gc.callbacks.pop()
    assert any("gc.get_debug()" in c for c in changes) and any("gc.callbacks" in c for c in changes), changes


def test_writing_a_backend_switch_is_judged_by_its_value_not_by_the_assignment():
    """`torch.backends.cuda.matmul.allow_tf32 = False` written with the value the switch already has (a common line
    in honest answers) is harmless: the static scan warns; a real change of a precision switch still fails it, and
    the fingerprint lists the change."""
    from kforge_worker.checks.integrity import IntegritySnapshot
    from kforge_worker.checks.static_scan import scan_source

    report = scan_source("import torch\ntorch.backends.cuda.matmul.allow_tf32 = False\n"
                         "torch.backends.cudnn.benchmark = False\n", "c.py", frozenset(), {"Model"})
    assert not [f for f in report.findings if f.severity == "fail"], report.findings
    flipped = scan_source(f"import torch\ntorch.backends.cuda.matmul.allow_tf32 = "
                          f"{not torch.backends.cuda.matmul.allow_tf32}\n", "c.py", frozenset(), {"Model"})
    assert [f for f in flipped.findings if f.severity == "fail"], flipped.findings  # a real change, spelled out
    # cudnn.benchmark is a speed switch of the candidate's own process (the reference is timed in its own): a change
    # is disclosed, not failed (seventh session's policy)
    bench = scan_source(f"import torch\ntorch.backends.cudnn.benchmark = {not torch.backends.cudnn.benchmark}\n",
                        "c.py", frozenset(), {"Model"})
    assert bench.findings and not [f for f in bench.findings if f.severity == "fail"], bench.findings
    snap = IntegritySnapshot.take()
    saved = torch.backends.cudnn.benchmark
    try:
        torch.backends.cudnn.benchmark = saved  # the value it has
        assert not [c for c in snap.diff(False) if "cudnn.benchmark" in c]
        torch.backends.cudnn.benchmark = not saved  # disclosed by the fingerprint, not a change that fails
        assert not [c for c in snap.diff(False) if "cudnn.benchmark" in c]
        assert any("cudnn.benchmark" in d for d in snap.disclosed), snap.disclosed
    finally:
        torch.backends.cudnn.benchmark = saved


def test_torch_compiling_on_its_own_after_the_baseline_is_no_change(tmp_path):
    """Sixth session's sweep: a reference calling flex_attention (whose eager path torch compiles on its first
    call) had every candidate `cheating` — nn.Module.__init__ wrapped by dynamo's first compile after the baseline —
    though neither source spells torch.compile. The verifier now prepares the compiler for every pair."""
    problem, candidate = tmp_path / "problem.py", tmp_path / "candidate.py"
    problem.write_text("import torch\nfrom torch import nn\nclass Model(nn.Module):\n"
                       "    def forward(self, x):\n        return torch.relu(x)\n")
    candidate.write_text(problem.read_text().replace("class Model", "class ModelNew"))
    script = textwrap.dedent(f"""
        import torch
        from kforge_worker.checks.verifier import Verifier
        verifier = Verifier({str(problem)!r}, {str(candidate)!r}, "cpu")
        verifier.before_import()
        verifier.audit.active = False
        # what torch does on its own at its first compile, neither source asking for it
        getattr(torch, "compile")(lambda x: x + 1, backend="eager")(torch.ones(2))
        print(verifier.snapshot.diff(thorough=False))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         cwd=os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout[-2000:]


def test_prepare_imports_filelock_so_its_audit_hook_predates_the_candidate():
    """torch's compile caches import filelock lazily, and on Python >= 3.12 filelock adds an audit hook when it is
    first imported: inside a candidate's torch.compile that read as the candidate's own hook (runtime_audit,
    `cheating` for an honest torch.compile on the H200). prepare() imports it first, in a fresh process here."""
    pytest.importorskip("filelock")
    code = ("import sys, torch\n"
            "from kforge_worker.checks.torch_compiler import prepare\n"
            "assert 'filelock' not in sys.modules\n"
            "prepare()\n"
            "assert 'filelock' in sys.modules\n")
    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
