"""The structural defences of issue 15 on their own: the process fingerprint (flags, environment, problem
globals, torch class attributes, global hooks), outputs still written after forward returned, threads
counted from the OS, and extra shapes above the problem's sizes."""

from __future__ import annotations

import os
import random
import threading
import time
import types

import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.input_checks import _larger, _smaller, check_extra_shapes
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.integrity import IntegritySnapshot, lingering_threads, native_threads
from kforge_worker.checks.output_checks import check_settled_outputs
from kforge_worker.checks.static_scan import ScanReport


def _problem_module() -> types.ModuleType:
    module = types.ModuleType("kforge_problem_fingerprint_test")
    exec(
        "import torch\nfrom torch import nn\nBATCH = 48\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
        "def get_inputs():\n    return [torch.rand(BATCH, 8)]\n"
        "def get_init_inputs():\n    return []\n",
        module.__dict__,
    )
    return module


def test_fingerprint_is_clean_when_nothing_changed():
    problem = _problem_module()
    snap = IntegritySnapshot.take(problem=problem)
    assert snap.diff() == []
    # torch ops, module construction and the problem's own functions leave no trace
    nn.Linear(4, 4)(torch.rand(2, 4))
    problem.Model()(*problem.get_inputs())
    assert snap.diff() == []


# A worker's own process: torch's compiler prepared as the verifier does before its snapshot. The cost grows with what
# a process has loaded (this test process, after hundreds of tests, watches far more), so it is measured in one.
_COST = """
import json, time, types
import torch
from kforge_worker.checks.torch_compiler import prepare
from kforge_worker.checks.integrity import IntegritySnapshot

prepare()
problem = types.ModuleType("kforge_problem_cost")
exec("import torch\\nclass Model(torch.nn.Module):\\n    def forward(self, x):\\n        return torch.relu(x)\\n",
     problem.__dict__)
IntegritySnapshot.take(problem=problem).diff()  # first calls: lazy imports of the harness's own modules
started = time.process_time()
snap = IntegritySnapshot.take(problem=problem)
taken = time.process_time() - started
started = time.process_time()
changes = snap.diff()
print(json.dumps([taken, time.process_time() - started, changes]))
"""


def test_fingerprint_is_cheap_in_a_workers_process():
    import json
    import subprocess
    import sys

    from conftest import PYTHON_DIR

    out = subprocess.run([sys.executable, "-c", _COST], capture_output=True, text=True, timeout=300, check=True,
                         env={**os.environ, "PYTHONPATH": str(PYTHON_DIR)}).stdout
    taken, diffed, changes = json.loads(out.strip().splitlines()[-1])
    assert changes == []
    # CPU time (a loaded machine does not change it): ~0.3 s each here; after a check group, never inside a timed loop
    assert taken < 1.0 and diffed < 1.0, (taken, diffed)


def test_fingerprint_names_a_flipped_sdpa_backend_and_thread_count():
    snap = IntegritySnapshot.take()
    threads = torch.get_num_threads()
    try:
        torch.backends.cuda.enable_mem_efficient_sdp(False)
        torch.set_num_threads(max(1, threads - 1) if threads > 1 else 2)
        problems = snap.diff()
    finally:
        torch.backends.cuda.enable_mem_efficient_sdp(True)
        torch.set_num_threads(threads)
    assert any("mem_efficient_sdp_enabled() changed from True to False" in p for p in problems)
    assert any("torch.get_num_threads()" in p for p in problems)
    assert snap.diff() == []


def test_fingerprint_sees_the_environment_but_not_harness_keys():
    snap = IntegritySnapshot.take()
    try:
        os.environ["KFORGE_TEST_FINGERPRINT"] = "1"
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = "/tmp/elsewhere"  # torch sets this when its instruments load
        problems = snap.diff()
    finally:
        os.environ.pop("KFORGE_TEST_FINGERPRINT", None)
        if "TORCHINDUCTOR_CACHE_DIR" in snap.environ:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = snap.environ["TORCHINDUCTOR_CACHE_DIR"]
        else:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    assert problems == ["os.environ['KFORGE_TEST_FINGERPRINT'] was set to '1'"]
    assert snap.diff() == []


def test_fingerprint_sees_problem_globals_code_and_methods():
    problem = _problem_module()
    snap = IntegritySnapshot.take(problem=problem)
    original_forward, original_code = problem.Model.forward, problem.get_inputs.__code__
    problem.Model.forward = lambda self, x: x
    problem.get_inputs.__code__ = (lambda: [torch.ones(48, 8)]).__code__
    problem.BATCH = 12
    problem.max = lambda *a: 0  # a builtin the module's code could read, shadowed
    problems = snap.diff()
    assert "problem.Model.forward was replaced" in problems
    assert "problem.get_inputs.__code__ was replaced" in problems
    assert "problem.BATCH changed from 48 to 12" in problems
    assert "problem.max was added" in problems
    problem.Model.forward, problem.get_inputs.__code__, problem.BATCH = original_forward, original_code, 48
    del problem.max
    assert snap.diff() == []


def test_globals_torch_compile_adds_to_a_problem_are_no_change_but_readable_ones_are():
    """torch.compile of a reference's helper installs its compiled graphs as new globals of the problem module, at
    any recompile (sixth session's sweep: `problem.__compiled_fn_7_… was added`, cheating for the identity). A name
    none of the problem's code reads changes nothing it computes; a name it reads (guarded), a builtin it would
    shadow, a KFORGE_ setting the harness reads or a module `__getattr__` (which answers the harness's getattr) is
    still a change."""
    problem = types.ModuleType("kforge_problem_added_globals_test")
    exec(
        "import torch\nfrom torch import nn\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x):\n"
        "        try:\n            return FAST(x)\n        except NameError:\n            return _act(x)\n"
        "@torch.compile(backend='eager')\ndef _act(x):\n    return torch.relu(x) * 2\n"
        "def get_inputs():\n    return [torch.rand(4, 8)]\n"
        "def get_init_inputs():\n    return []\n",
        problem.__dict__,
    )
    from kforge_worker.checks.torch_compiler import prepare

    prepare()  # the worker's own step when a source reaches the compiler: dynamo's first-compile wrappers now
    snap = IntegritySnapshot.take(problem=problem)
    problem.Model()(*problem.get_inputs())  # dynamo compiles _act now: its globals land in the module
    assert any(name.startswith("__compiled_fn") for name in vars(problem)), "dynamo no longer installs globals"
    assert snap.diff(thorough=False) == []
    problem.FAST = torch.zeros_like  # read by forward's guarded lookup
    problem.sorted = lambda *a: []  # shadows a builtin
    problem.KFORGE_ATOL = 1.0
    problem.__getattr__ = lambda name: 1.0
    problems = snap.diff(thorough=False)
    for name in ("FAST", "sorted", "KFORGE_ATOL", "__getattr__"):
        assert f"problem.{name} was added" in problems, (name, problems)


def test_every_added_global_counts_where_the_problem_reads_globals_by_computed_names():
    problem = types.ModuleType("kforge_problem_computed_names_test")
    exec("def helper(name):\n    return globals()[name]\n", problem.__dict__)
    snap = IntegritySnapshot.take(problem=problem)
    problem.anything = 1
    assert "problem.anything was added" in snap.diff(thorough=False)


def test_fingerprint_sees_methods_added_to_torch_classes_and_global_hooks():
    snap = IntegritySnapshot.take()
    torch.Tensor.kforge_fast = lambda self: self
    nn.Linear.kforge_fast = lambda self: self
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, a, o: o)
    try:
        problems = snap.diff()
    finally:
        del torch.Tensor.kforge_fast
        del nn.Linear.kforge_fast
        handle.remove()
    assert any(p.startswith("torch.Tensor gained kforge_fast") for p in problems)
    assert any(p.startswith("torch.nn.Linear gained kforge_fast") for p in problems)
    assert any("_global_forward_hooks changed from 0 to 1" in p for p in problems)
    assert snap.diff() == []


def test_a_replaced_layer_forward_is_a_change():
    snap = IntegritySnapshot.take()
    original = nn.Linear.forward
    nn.Linear.forward = lambda self, x: x
    try:
        problems = snap.diff()
    finally:
        nn.Linear.forward = original
    assert any(p.startswith("torch.nn.Linear.forward was replaced") for p in problems)


def test_declared_tf32_lets_the_tf32_switches_change_and_nothing_else():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())
    declared = IntegritySnapshot.take(allow_tf32=True)
    undeclared = IntegritySnapshot.take()
    try:
        torch.backends.cuda.matmul.allow_tf32 = not before[0]
        torch.set_float32_matmul_precision("high" if before[1] == "highest" else "highest")
        assert declared.diff() == []
        assert any("allow_tf32" in p or "float32_matmul_precision" in p for p in undeclared.diff())
        torch.set_float32_matmul_precision("medium")  # bf16 passes: not what --allow-tf32 declared
        assert any("float32_matmul_precision" in p for p in declared.diff())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before[0]
        torch.set_float32_matmul_precision(before[1])


def test_cudnn_benchmark_is_disclosed_and_the_precision_switches_still_fail():
    """Issue 15: the process fingerprint agrees with the static scan (static_scan.DISCLOSED_SWITCHES): a flipped
    cudnn.benchmark is disclosed (harness_integrity warns), a flipped cudnn.deterministic or TF32 switch fails."""
    from kforge_worker.checks.harness_checks import check_integrity

    cudnn = torch.backends.cudnn
    before = (cudnn.benchmark, cudnn.deterministic, torch.backends.cuda.matmul.allow_tf32)
    snap = IntegritySnapshot.take()
    ctx = types.SimpleNamespace(snapshot=snap, audit=None, threads_before=None)
    try:
        cudnn.benchmark = not before[0]
        assert snap.diff() == [] and snap.disclosed == [f"torch.backends.cudnn.benchmark changed from {before[0]!r} "
                                                        f"to {not before[0]!r}"]
        [result] = check_integrity(ctx, "the import")
        assert result.outcome == "warn" and "cudnn.benchmark" in result.evidence, result
        cudnn.deterministic = not before[1]
        torch.backends.cuda.matmul.allow_tf32 = not before[2]
        problems = snap.diff()
        assert any("cudnn.deterministic" in p for p in problems) and any("allow_tf32" in p for p in problems)
        [result] = check_integrity(ctx, "the import")
        assert result.outcome == "fail" and result.fail_verdict == "cheating", result
    finally:
        cudnn.benchmark, cudnn.deterministic, torch.backends.cuda.matmul.allow_tf32 = before
    assert snap.diff() == [] and snap.disclosed == []


# ------------------------------------------------------------------------------ outputs and threads
def _context(ref: nn.Module, cand: nn.Module, make_inputs) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(5))


class _Relu(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class _LateWriter(nn.Module):
    """Returns zeros; a thread writes the answer 3 ms later."""

    def forward(self, x):
        out = torch.zeros_like(x)

        def fill() -> None:
            time.sleep(0.003)
            out.copy_(torch.relu(x))

        threading.Thread(target=fill).start()
        return out


class _JoinedPool(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        parts = [slice(0, x.shape[0] // 2), slice(x.shape[0] // 2, x.shape[0])]
        workers = [threading.Thread(target=lambda s=s: out[s].copy_(torch.relu(x[s]))) for s in parts]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return out


class _LeavesAThread(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stop = threading.Event()

    def forward(self, x):
        threading.Thread(target=self.stop.wait, daemon=True).start()
        return torch.relu(x)


def _inputs(seed: int):
    return [torch.randn(16, 8, generator=torch.Generator().manual_seed(seed))]


def test_outputs_written_after_return_are_cheating():
    result = check_settled_outputs(_context(_Relu(), _LateWriter(), _inputs))
    assert result.outcome == "fail" and result.fail_verdict == "cheating"
    assert "changed after forward returned" in result.evidence
    time.sleep(0.02)


def test_joined_threads_and_plain_forwards_settle():
    for cand in (_Relu(), _JoinedPool()):
        result = check_settled_outputs(_context(_Relu(), cand, _inputs))
        assert result.outcome == "pass", result.evidence


def test_a_thread_left_running_by_forward_is_named_from_the_os():
    cand = _LeavesAThread()
    try:
        result = check_settled_outputs(_context(_Relu(), cand, _inputs), calls=1)
    finally:
        cand.stop.set()
    assert result.outcome == "fail" and "left OS thread(s) running" in result.evidence


def test_lingering_threads_waits_for_joined_threads_to_leave():
    before = native_threads()
    assert before  # /proc/self/task is readable on Linux
    t = threading.Thread(target=time.sleep, args=(0.001,))
    t.start()
    t.join()
    assert lingering_threads(before) == {}
    stop = threading.Event()
    alive = threading.Thread(target=stop.wait, daemon=True)
    alive.start()
    try:
        assert len(lingering_threads(before, timeout=0.05)) == 1
    finally:
        stop.set()
        alive.join()


# ------------------------------------------------------------------------------------- extra shapes
def test_shape_steps_are_odd_and_on_both_sides():
    for s in (8, 48, 64, 96, 512, 16384):
        assert _smaller(s) < s and _smaller(s) % 2 == 1
        up = _larger(s)
        assert up[0] % 2 == 1 and s < up[0] <= 2 * s and up[-1] > s


class _RowsUpTo64(nn.Module):
    """Right for up to 64 rows, zeros beyond: wrong only above the benchmark's 48."""

    def forward(self, x):
        out = torch.zeros_like(x)
        out[:64] = torch.relu(x[:64])
        return out


def _rows(seed: int):
    return [torch.randn(48, 8, generator=torch.Generator().manual_seed(seed))]


def test_a_candidate_wrong_only_above_the_benchmark_size_is_incorrect():
    result = check_extra_shapes(_context(_Relu(), _RowsUpTo64(), _rows))
    assert result.outcome == "fail" and result.fail_verdict == "incorrect"
    assert "48->73" in result.evidence


def test_an_honest_candidate_passes_sizes_below_and_above():
    result = check_extra_shapes(_context(_Relu(), _Relu(), _rows))
    assert result.outcome == "pass", result.evidence
    assert "48->37" in result.evidence and "48->73" in result.evidence


def test_larger_sizes_respect_the_footprint_budget():
    """A square input grows as the square of its size: 1.5× would be 2.25× the bytes, so a smaller step
    (within 2×) is taken; with a budget below any step the larger size is skipped and said so."""

    def square(seed: int):
        return [torch.randn(64, 64, generator=torch.Generator().manual_seed(seed))]

    result = check_extra_shapes(_context(_Relu(), _Relu(), square))
    assert result.outcome == "pass" and "64->81" in result.evidence and "64->97" not in result.evidence
    tight = check_extra_shapes(_context(_Relu(), _Relu(), square), budget=1.01)
    assert tight.outcome == "warn" and "footprint budget" in tight.evidence and "64->49" in tight.evidence


def test_a_larger_size_whose_copies_exceed_the_budget_is_tried_with_another_size_shrunk(monkeypatch):
    """A large problem: the 1.5× step's copies (the variant, the candidate's copy, both outputs) would not fit the
    check budget, so the rows grow while the columns shrink, the inputs within the problem's bytes — a kernel wrong
    above the benchmark's row count is still caught, and the check holds no more than the budget."""
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", str(48 * 8 * 4 * 6))
    caught = check_extra_shapes(_context(_Relu(), _RowsUpTo64(), _rows))
    assert caught.outcome == "fail" and "48->73 (with 8->5: the inputs within the problem's bytes)" in caught.evidence
    honest = check_extra_shapes(_context(_Relu(), _Relu(), _rows))
    assert honest.outcome == "pass" and "(with 8->5" in honest.evidence and "48->37: ok" in honest.evidence


def test_torch_importing_its_compiler_after_the_snapshot_is_no_change_but_a_forged_wrapper_is():
    """torch imports dynamo lazily (a Python reference's first call, mid-eval), and dynamo's import wraps
    torch.manual_seed in its `disable`: torch's own wrapper around the same function, not tampering. The same
    wrapper around another function, claiming the original through `__wrapped__`, is; so is torch's wrapper code
    run with globals of one's own."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import sys, torch
        from kforge_worker.checks.integrity import IntegritySnapshot
        assert "torch._dynamo" not in sys.modules, "this interpreter imported dynamo already"
        snap = IntegritySnapshot.take()
        original = torch.manual_seed
        import torch._dynamo
        assert torch.manual_seed is not original, "dynamo's import no longer wraps manual_seed"
        print("lazy:", snap.diff(thorough=False))
        snap = IntegritySnapshot.take()
        original = torch.manual_seed

        def evil(seed):
            return original(seed + 1)

        forged = torch._disable_dynamo(evil)
        forged.__wrapped__ = original
        torch.manual_seed = forged
        print("forged:", any("manual_seed" in p for p in snap.diff(thorough=False)))
        torch.manual_seed = original
        snap = IntegritySnapshot.take()
        import types
        own = torch._disable_dynamo(original)  # torch's wrapper code, closing over the original...
        scope = dict(vars(sys.modules["torch._compile"]))  # ...run with a dict of one's own
        rebuilt = types.FunctionType(own.__code__, scope, own.__name__, own.__defaults__, own.__closure__)
        rebuilt.__wrapped__ = original
        torch.manual_seed = rebuilt
        print("globals:", any("manual_seed" in p for p in snap.diff(thorough=False)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=os.path.join(os.path.dirname(__file__), "..", "..", "python")).stdout.splitlines()
    assert out == ["lazy: []", "forged: True", "globals: True"], out
