"""Red team round 15 (2026-11-30, CPU, by a helper): defences, each with a test that fails on the tree before it.

See bench/verify/NOTES.md, "Session 2026-11-30 (seventh): red team round 15".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kforge_worker.checks.instrument import OpRecorder
from kforge_worker.checks.ops import op_family

# Operators of namespaces of this test's own, made once per process (a namespace can be defined only once).
_LIB = torch.library.Library("rt15_test_ops", "DEF")
_LIB.define("linear_relu(Tensor x, Tensor w, Tensor b) -> Tensor")
_LIB.impl("linear_relu", lambda x, w, b: F.relu(torch.addmm(b, x, w.t())), "CompositeExplicitAutograd")
_LIB.define("mm_cpu(Tensor a, Tensor b) -> Tensor")
_LIB.impl("mm_cpu", lambda a, b: torch.mm(a, b), "CPU")


@torch.library.custom_op("rt15_test_custom::linear_relu", mutates_args=())
def _custom_linear_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.relu(F.linear(x, w, b))


@_custom_linear_relu.register_fake
def _(x, w, b):
    return x.new_empty(x.shape[0], w.shape[0])


def _gemm_ops(recorder: OpRecorder) -> list[str]:
    return sorted(op for op in recorder.ops if op_family(op) == "gemm")


def test_a_library_gemm_inside_an_operator_of_the_candidates_own_is_recorded():
    """torch pops a dispatch mode before handing it an op, so an op of the candidate's own namespace ran its body
    unrecorded: a PyTorch GEMM wrapped in torch.library.custom_op (or a TORCH_LIBRARY op whose C++ calls at::addmm)
    read as "no gemm op executed" under --strict and "the forward called its compiled code"."""
    x, w, b = torch.rand(6, 8), torch.rand(5, 8), torch.rand(5)
    expected = F.relu(F.linear(x, w, b))
    for call in (lambda: _custom_linear_relu(x, w, b),
                 lambda: torch.ops.rt15_test_ops.linear_relu(x, w, b),
                 lambda: torch.ops.rt15_test_ops.mm_cpu(x, w.t()).add(b).relu()):
        recorder = OpRecorder()
        with recorder:
            out = call()
        torch.testing.assert_close(out, expected)
        assert recorder.custom_ops(), recorder.ops  # still named as the candidate's own operator
        assert _gemm_ops(recorder), dict(recorder.ops)  # and the GEMM inside it is in the record
        torch.testing.assert_close(call(), expected)  # nothing left behind: a plain call still runs


def test_the_worker_judges_the_candidate_text_the_cli_read_not_the_file_as_it_is_now(cache_dir, tmp_path):
    """In a suite, an earlier candidate's code (at import or in forward) could rewrite a later candidate's file before
    its turn: that one was judged on the writer's choice of code (adv_suite_sibling_rewrite left its sibling an
    ImportError while itself passing as correct). The CLI now sends the text it read when the suite was set up, and
    the worker imports that under the file's path (GivenSourceLoader): the static scan reads it too."""
    from conftest import candidate, evaluate, make_request, problem

    path = tmp_path / "victim.py"
    path.write_text("raise ImportError('rewritten by another candidate')\n")  # what the file holds when its turn comes
    request = make_request(problem("tiny_linear"), str(path), cache_dir, trials=2)
    request["candidate"]["source"] = open(candidate("linear_correct")).read()  # what the CLI read at the start
    result, _ = evaluate(request)
    assert result["verdict"] == "correct", (result["verdict"], result.get("reason"))

    # A request without the text (hand-written) reads the file, as before.
    result, _ = evaluate(make_request(problem("tiny_linear"), str(path), cache_dir, trials=2))
    assert result["verdict"] == "import_error" and "rewritten by another candidate" in result["reason"]


def test_a_module_imported_from_given_text_keeps_the_files_path(tmp_path):
    from kforge_worker.loading import import_path

    (tmp_path / "helper_rt15.py").write_text("VALUE = 7\n")
    path = tmp_path / "cand.py"
    path.write_text("WHICH = 'disk'\n")
    module = import_path(str(path), "candidate", "import os, helper_rt15\nWHICH = 'given'\nHERE = os.path.dirname(__file__)\n")
    assert module.WHICH == "given" and module.HERE == str(tmp_path) and module.helper_rt15.VALUE == 7


_RENAMED = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.inner = nn.Linear(*args)  # registered under another name: the harness syncs the pair by seed
        self._w = self.inner.weight.detach().clone()
        self._b = self.inner.bias.detach().clone()

    def forward(self, x):
        return torch.relu({forward})
'''


def test_weights_under_names_of_its_own_are_paired_by_value_and_must_be_followed(cache_dir, tmp_path):
    """Renamed state_dict keys skipped state_reload ("parameters cannot be swapped"): weights folded at __init__ into
    plain attributes passed as correct. The reference's entries are now paired with the candidate's by their values
    (both built from one seed), and the reload checks write the candidate's own names."""
    from conftest import evaluate, make_request, problem

    def judged(forward):
        path = tmp_path / f"cand_{abs(hash(forward))}.py"
        path.write_text(_RENAMED.replace("{forward}", forward))
        request = make_request(problem("tiny_linear"), str(path), cache_dir, trials=2, checks=["state"])
        request["options"]["referenceProcess"] = False
        result, _ = evaluate(request, use_checks=True)
        return result["verdict"], next(c for c in result["checks"] if c["name"] == "state_reload")

    verdict, reload = judged("torch.addmm(self._b, x, self._w.t())")  # folded at __init__: never follows a load
    assert verdict == "incorrect" and reload["outcome"] == "fail", (verdict, reload)
    assert "inner.weight for fc.weight" in reload["evidence"], reload
    verdict, reload = judged("self.inner(x)")  # reads its (renamed) parameters: follows
    assert verdict == "correct" and reload["outcome"] == "pass", (verdict, reload)


def test_ops_kept_from_the_python_dispatch_key_are_seen_by_the_profiler_witness(cache_dir, tmp_path):
    """A dispatch mode sees only ops that reach the Python dispatch key: a GEMM run under
    torch._C._ExcludeDispatchKeyGuard over that key never reached the op record, and --strict read "no gemm op
    executed". check_ops now records the same forward with torch's profiler too (RecordFunction, at the dispatcher's
    entry) and judges the families it saw that the record has none of."""
    from conftest import evaluate, make_request

    from kforge_worker.checks.execution_checks import _profiler_witness

    x, w, b = torch.rand(6, 8), torch.rand(5, 8), torch.rand(5)
    recorder = OpRecorder()
    with _profiler_witness() as seen, recorder:
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
            F.linear(x, w, b)
    assert not _gemm_ops(recorder), dict(recorder.ops)  # the dispatch record is blind to it
    assert any(op_family(op) == "gemm" for op in seen), seen  # the profiler is not

    candidate = tmp_path / "exclude_python_key.py"
    candidate.write_text('''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.fc = nn.Linear(*args)

    def forward(self, x):
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):
            return torch.relu(F.linear(x, self.fc.weight, self.fc.bias))
''')
    import os

    problem = os.path.join(os.path.dirname(__file__), "..", "verify", "problems", "tiny_linear_relu.py")
    for strict, outcome in ((True, "fail"), (False, "warn")):
        request = make_request(os.path.abspath(problem), str(candidate), cache_dir, trials=2, checks=["ops"])
        request["options"]["referenceProcess"] = False
        request["options"]["strict"] = strict
        result, _ = evaluate(request, use_checks=True)
        banned = next(c for c in result["checks"] if c["name"] == "banned_ops")
        assert banned["outcome"] == outcome and "profiler saw" in banned["evidence"], banned
        assert result["verdict"] == ("cheating" if strict else "correct"), result["verdict"]


def test_library_operators_linked_past_the_dispatcher_are_read_from_the_extensions_symbols(tmp_path, monkeypatch):
    """adv_cpp_native_gemm: a load_inline extension calling at::cpu::addmm (ATen's CPU kernel, entered directly) ran
    the GEMM with no dispatcher op, so neither the dispatch-mode record nor the profiler saw it. The libraries the
    candidate built are read for the library entry points they link (nm -DC --undefined-only), by op family."""
    import os
    import types

    from kforge_worker.checks import execution_checks

    listing = "\n".join([
        "                 U at::cpu::addmm(at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&)",
        "                 U at::_ops::t::call(at::Tensor const&)",
        "                 U at::_ops::mm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)",
        "                 U at::native::resize_output(at::Tensor const&, c10::ArrayRef<long>)",
        "                 U cublasSgemm_v2@libcublas.so.12",
        "                 U at::cpu::convolution(at::Tensor const&)",
    ])
    fake = tmp_path / "nm"
    fake.write_text(f"#!/bin/sh\ncat <<'X'\n{listing}\nX\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    library = tmp_path / "ext.so"
    library.write_bytes(b"")
    monkeypatch.setattr(execution_checks, "_extension_libraries", lambda ctx: [str(library)])
    ctx = types.SimpleNamespace(ref_families=frozenset({"gemm"}))
    assert execution_checks._linked_family_entries(ctx) == ["at::_ops::mm::redispatch", "at::cpu::addmm",
                                                            "cublasSgemm_v2"]
    ctx = types.SimpleNamespace(ref_families=frozenset({"conv"}))
    assert execution_checks._linked_family_entries(ctx) == ["at::cpu::convolution"]


def test_integer_outputs_compare_exactly_in_the_pass_mark():
    """adv_counts_partial: per-row counts near 100,000 over all but the last 8 columns passed every trial — the pass
    mark's relative band (1e-4 x |count| = 10) applied to integer outputs as to floating ones. Integers and bools
    have no rounding for a band to absorb (the checks' own comparison was already exact)."""
    from kforge_worker.compare import compare_output, compare_timed

    ref = torch.tensor([100163, 99950, 100020], dtype=torch.int64)
    off = ref - torch.tensor([7, 0, 3])
    verdict = compare_output(0, off, ref, None, 1e-4, 1e-4)
    assert not verdict.passed and "compare exactly" in verdict.message, verdict.message
    assert compare_output(0, ref.clone(), ref, None, 1e-4, 1e-4).passed
    assert not compare_timed(0, off, ref, 1e-4, 1e-4)[0]
    mask = torch.tensor([True, False, True])
    assert not compare_output(0, ~mask, mask, None, 1e-2, 1e-2).passed
    assert compare_output(0, mask.clone(), mask, None, 1e-2, 1e-2).passed
    floats = torch.tensor([100163.0, 99950.0])  # floating outputs keep the band
    assert compare_output(0, floats + 5, floats, None, 1e-4, 1e-4).passed


def test_the_kernel_tables_of_higher_order_operators_are_in_the_fingerprint():
    """adv_hop_kernel_mirror: flex_attention's CompositeExplicitAutograd kernel replaced at import (a Python dict on
    the HOP, which no dispatcher or module fingerprint read), so the worker's copy of a flex reference made the
    candidate's mistake at the shapes the checks vary. The HOPs' kernel tables are now in the wiring fingerprint: a
    replaced kernel, or one added from outside torch, is a change; unchanged tables are none."""
    import torch._ops
    from torch._C import DispatchKey

    from kforge_worker.checks.torch_wiring import wiring, wiring_changes

    hop = torch._ops._higher_order_ops["cond"]
    table = hop.py_kernels
    before = wiring()
    assert not wiring_changes(before)
    original = table[DispatchKey.CompositeExplicitAutograd]
    try:
        table[DispatchKey.CompositeExplicitAutograd] = lambda *args, **kwargs: original(*args, **kwargs)
        changes = wiring_changes(before)
        assert any("higher_order::cond.py_kernels[CompositeExplicitAutograd] was replaced" in c for c in changes), changes
    finally:
        table[DispatchKey.CompositeExplicitAutograd] = original
    assert not wiring_changes(before)
    key = next(k for k in (DispatchKey.CPU, DispatchKey.CUDA, DispatchKey.Meta) if k not in table)
    try:
        table[key] = lambda *args, **kwargs: None
        changes = wiring_changes(before)
        assert any(f"higher_order::cond.py_kernels[{key.name}] was added" in c for c in changes), changes
    finally:
        table.pop(key, None)
    assert not wiring_changes(before)


def test_another_processs_proc_entry_is_a_sensitive_path(tmp_path):
    """adv_read_reference_memory: the clean reference process is the worker's child, so the candidate's code could
    read its memory through /proc/<pid>/mem (only /proc/self and the worker's own pid were sensitive). Any other
    process's /proc entry is now, also through a symlink or a relative path; the worker's own threads are its own."""
    import os
    import subprocess
    import sys
    import threading

    from kforge_worker.checks.integrity import _other_process

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert _other_process(f"/proc/{child.pid}/mem")
        assert _other_process(f"/proc/{child.pid}")
        link = tmp_path / "there"
        link.symlink_to(f"/proc/{child.pid}")
        assert _other_process(str(link / "maps"))
        assert _other_process(os.fsdecode(os.fsencode(f"/proc/./{child.pid}/environ")))
    finally:
        child.kill()
        child.wait()
    assert not _other_process("/proc/cpuinfo") and not _other_process("/proc/self/status")
    assert not _other_process(str(tmp_path)) and not _other_process("3")
    release = threading.Event()
    ids = {}

    def wait():
        ids["tid"] = threading.get_native_id()
        release.wait(10)

    thread = threading.Thread(target=wait)
    thread.start()
    try:
        while "tid" not in ids:
            pass
        assert not _other_process(f"/proc/{ids['tid']}/comm")  # a live thread of this process: its own
    finally:
        release.set()
        thread.join()
