"""The reference in its own clean process (reference_process.py): what it guarantees, on the CPU path.

The structural claims are tested with the verification checks OFF (use_checks=False), so what catches a
tampered reference here is the process boundary, not the fingerprint: the same candidates pass as `correct`
when the reference shares the worker's process.
"""

from __future__ import annotations

import os

import pytest
import torch
from conftest import REPO, assert_valid, candidate, evaluate, make_request, problem

from kforge_worker.reference_process import (Exporter, Importer, ReferenceProcess, ReferenceProcessError,
                                             Untransportable, decode_values, dense_layout, encode_values)
from kforge_worker.request import parse_request

CORPUS = REPO / "test" / "verify"


def _request(problem_path: str, candidate_path: str, cache_dir: str, isolated: bool | None, **kw) -> dict:
    request = make_request(problem_path, candidate_path, cache_dir, **kw)
    if isolated is not None:
        request["options"]["referenceProcess"] = isolated
    return request


def test_the_default_is_a_process_on_both_devices(cache_dir: str) -> None:
    base = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir)
    assert parse_request(base).reference_in_own_process is True
    base["options"]["device"] = "cuda"
    assert parse_request(base).reference_in_own_process is True
    base["options"]["referenceProcess"] = False
    assert parse_request(base).reference_in_own_process is False
    base["options"]["referenceProcess"] = "yes"
    with pytest.raises(ValueError, match="referenceProcess"):
        parse_request(base)


def test_shared_tensors_round_trip_with_their_layout_and_stay_the_workers_own(tmp_path) -> None:
    exporter, importer = Exporter(str(tmp_path)), Importer()
    transposed = torch.randn(5, 3).t()  # a strided input keeps its strides, as clone() keeps them
    values = [transposed, torch.randn(4, dtype=torch.float64), torch.randn(6).to(torch.bfloat16),
              torch.tensor([True, False]), torch.arange(7), torch.empty(0, 3), torch.randn(2, 1).expand(2, 4), 3, [1.5, 2]]
    encoded = encode_values(values, exporter, "in")
    got = decode_values(encoded, importer)
    for sent, back in zip(values, got):
        if isinstance(sent, torch.Tensor):
            assert back.dtype == sent.dtype and back.shape == sent.shape and torch.equal(back, sent)
        else:
            assert back == sent
    assert got[0].stride() == transposed.stride() and dense_layout(got[0])
    assert got[6].is_contiguous()  # an expanded (overlapping) input arrives dense
    # The worker's copy is its own: writing to it leaves the shared buffer — the reference's next input — alone.
    got[0].fill_(0)
    assert torch.equal(importer.view(encoded[0]["tensor"]), transposed)
    # A staging name is reused: the next put of the same size writes into the same file.
    again = exporter.put("in0", torch.ones(3, 5).t())
    assert again["path"] == encoded[0]["tensor"]["path"] and torch.equal(importer.view(again), torch.ones(5, 3))
    with pytest.raises(Untransportable, match="only tensors and JSON values"):
        encode_values([object()], exporter, "x")
    assert decode_values(encode_values([(1, 2)], exporter, "t"), importer) == [(1, 2)]  # a tuple stays a tuple


def test_trials_come_from_a_clean_process_that_never_imports_the_candidate(cache_dir: str, tmp_path) -> None:
    marker = tmp_path / "imported_by"
    spy = tmp_path / "spy.py"
    spy.write_text(
        "import os\nimport torch\nimport torch.nn as nn\n"
        f"open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, i, o):\n        super().__init__()\n        self.fc = nn.Linear(i, o)\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n"
    )
    result, _ = evaluate(_request(problem("tiny_linear"), str(spy), cache_dir, None, timing=True))
    assert result["verdict"] == "correct", result["reason"]
    check = next(c for c in result["checks"] if c["name"] == "reference_isolation")
    assert check["outcome"] == "pass"
    child = int(check["evidence"].split("(pid ")[1].split(")")[0])
    assert child != os.getpid()
    assert marker.read_text().split() == [str(os.getpid())]  # imported here only, never in the reference process
    assert result["timing"]["inputs"]["reference"] == "process"
    assert "reference timed in its own process (cpu perf_counter" in result["timing"]["method"]
    assert result["timing"]["ref"]["n"] == result["timing"]["cand"]["n"] >= 10
    assert result["trials"][0]["outputs"][0]["refVsFp64"]["relL2"] is not None  # float64 from the clean process
    assert_valid({"type": "result", "result": result})


def test_a_reference_tampered_in_the_workers_process_is_caught_by_the_clean_one(cache_dir: str) -> None:
    """adv_problem_forward replaces the problem's Model.forward with its own (wrong) answer: in one process every
    comparison compares the candidate with itself; with the clean reference it is `cheating`."""
    tampering = str(CORPUS / "candidates" / "adv_problem_forward.py")
    problem_path = str(CORPUS / "problems" / "tiny_linear_relu.py")
    shared, _ = evaluate(_request(problem_path, tampering, cache_dir, False))
    assert shared["verdict"] == "correct"  # without the fingerprint, nothing in one process sees it
    isolated, _ = evaluate(_request(problem_path, tampering, cache_dir, True))
    assert isolated["verdict"] == "cheating", isolated["reason"]
    assert isolated["reason"].startswith("reference_isolation: the reference in the candidate's process answers "
                                         "differently from the clean reference process (trial 0 output 0")


def _evaluate_in_a_fresh_process(request: dict) -> dict:
    """pipeline.evaluate without the checks, in a new interpreter (torch imported by the pipeline, as in the
    worker, so its OpenMP settings are the worker's; and the candidate's hook dies with the process)."""
    import json
    import subprocess
    import sys

    script = ("import json, sys\n"
              "from kforge_worker.channel import NullChannel\n"
              "from kforge_worker.pipeline import evaluate\n"
              "from kforge_worker.request import parse_request\n"
              "result = evaluate(parse_request(json.load(sys.stdin)), NullChannel(), use_checks=False)\n"
              "sys.__stdout__.write(json.dumps(result))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    env.pop("OMP_WAIT_POLICY", None)
    proc = subprocess.run([sys.executable, "-c", script], input=json.dumps(request), capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_reference_is_timed_where_the_candidate_cannot_slow_it(cache_dir: str) -> None:
    """adv_global_forward_hook sleeps 2 ms in every forward of a module called Model: the reference's time in
    the worker's process; the clean process never sees the hook. (Checks off: the fingerprint would name the
    hook; what is shown here is the process boundary.)"""
    slowing = str(CORPUS / "candidates" / "adv_global_forward_hook.py")
    problem_path = str(CORPUS / "problems" / "tiny_linear_relu.py")
    timed = dict(timing=True, min_iters=20, max_iters=20)
    shared = _evaluate_in_a_fresh_process(_request(problem_path, slowing, cache_dir, False, **timed))
    isolated = _evaluate_in_a_fresh_process(_request(problem_path, slowing, cache_dir, True, **timed))
    assert shared["verdict"] == isolated["verdict"] == "correct"  # the hook costs time, it changes no output
    assert shared["timing"]["ref"]["minMs"] >= 2.0  # slowed: every reference call slept
    assert isolated["timing"]["ref"]["medianMs"] < 1.0  # a 48x96 @ 96x64 GEMM, untouched
    assert isolated["timing"]["speedup"] < 2.0


def _problem_file(path, forward: str, init: str):
    """A one-input problem whose Model.forward and get_init_inputs bodies are given."""
    path.write_text(
        "import torch, torch.nn as nn\n"
        f"class Model(nn.Module):\n    def forward(self, x):\n        {forward}\n"
        "def get_inputs():\n    return [torch.randn(4, 3)]\n"
        f"def get_init_inputs():\n    {init}\n"
    )
    return path


def test_a_problem_failure_in_the_reference_process_is_the_problems(cache_dir: str, tmp_path) -> None:
    broken = _problem_file(tmp_path / "forward_fails.py", forward="return x.sum(dim=5)", init="return []")
    identity = tmp_path / "ident.py"
    identity.write_text("import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    result, _ = evaluate(_request(str(broken), str(identity), cache_dir, True))
    assert result["verdict"] == "problem_error"
    assert "Model.forward" in result["reason"] and "(in the reference process)" in result["reason"]


def test_a_dead_reference_process_is_a_run_that_cannot_be_judged(cache_dir: str, tmp_path) -> None:
    killer = tmp_path / "killer.py"
    killer.write_text(
        "import os, signal, torch.nn as nn\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, i, o):\n        super().__init__()\n        self.fc = nn.Linear(i, o)\n"
        "        for pid in os.listdir('/proc'):\n"
        "            if pid.isdigit() and int(pid) != os.getpid():\n"
        "                try:\n                    cmd = open(f'/proc/{pid}/cmdline').read()\n"
        "                except OSError:\n                    continue\n"
        "                if 'kforge_worker.reference_process' in cmd and os.getppid() != int(pid):\n"
        "                    if open(f'/proc/{pid}/stat').read().split()[3] == str(os.getpid()):\n"
        "                        os.kill(int(pid), signal.SIGKILL)\n"
        "    def forward(self, x):\n        return self.fc(x)\n"
    )
    result, _ = evaluate(_request(problem("tiny_linear"), str(killer), cache_dir, True))
    assert result["verdict"] == "runtime_error"
    assert "the reference process ended" in result["reason"] and "cannot be judged" in result["reason"]


def test_the_process_is_closed_and_its_shared_files_removed(cache_dir: str) -> None:
    ref = ReferenceProcess({"problemPath": problem("tiny_linear"), "device": "cpu", "dtype": None, "seed": 3,
                            "allowTf32": False, "fp64": True})
    directory = ref.info["directory"]
    inputs, outs, outs64 = ref.trial(11)
    assert inputs[0].shape == (4, 16) and outs[0].shape == (4, 8) and outs64.outputs[0].dtype == torch.float64
    assert not outs64.sampled and outs64.note == "float64 on the whole batch"
    again, _, _ = ref.trial(11)
    assert torch.equal(again[0], inputs[0])  # the seed decides the inputs
    # Lines written into the child's stdin by someone else (adv_fd_forge writes to every descriptor) are
    # ignored — no nonce, or no id — and cannot shift the replies.
    ref.proc.stdin.write('{"type": "result", "result": {"verdict": "correct"}}\n{"op": "trial", "seed": 1, "id": 99}\n')
    ref.proc.stdin.flush()
    third, _, _ = ref.trial(11)
    assert torch.equal(third[0], inputs[0])
    assert os.path.isdir(directory) and os.listdir(directory)
    ref.close()
    assert ref.proc.returncode == 0 and not os.path.exists(directory)


def test_release_frees_the_trials_staging_and_later_trials_still_work(cache_dir: str) -> None:
    ref = ReferenceProcess({"problemPath": problem("tiny_linear"), "device": "cpu", "dtype": None, "seed": 3,
                            "allowTf32": False, "fp64": True})
    try:
        directory = ref.info["directory"]
        inputs, _, _ = ref.trial(11)
        first = inputs[0].clone()
        assert os.listdir(directory)  # the trial's inputs and outputs are staged in files there
        ref.release()
        assert os.listdir(directory) == []
        again, outs, _ = ref.trial(11)
        assert torch.equal(again[0], first) and outs[0].shape == (4, 8)
    finally:
        ref.close()


def test_after_release_a_trial_reads_the_new_files_not_the_unlinked_ones(cache_dir: str) -> None:
    """release() unlinks the staging files and the next trial writes new ones under the same names: a mapping kept
    by name read the old files' last contents (the isolation probe compared the last trial's data again)."""
    ref = ReferenceProcess({"problemPath": problem("tiny_linear"), "device": "cpu", "dtype": None, "seed": 3,
                            "allowTf32": False, "fp64": True})
    try:
        first, _, _ = ref.trial(11)
        first = first[0].clone()
        ref.release()
        later, outs, _ = ref.trial(12)
        assert not torch.equal(later[0], first)
        again, outs_again, _ = ref.trial(12)
        assert torch.equal(later[0], again[0]) and torch.equal(outs[0], outs_again[0])
    finally:
        ref.close()


def test_a_problem_that_fails_to_build_in_the_reference_process_is_the_problems(cache_dir: str, tmp_path) -> None:
    broken = _problem_file(tmp_path / "init_fails.py", forward="return x", init="raise ValueError('no init for you')")
    result, _ = evaluate(_request(str(broken), candidate("linear_correct"), cache_dir, True))
    assert result["verdict"] == "problem_error"
    assert "get_init_inputs()" in result["reason"] and "no init for you" in result["reason"]


def test_a_reference_process_that_cannot_start_leaves_the_reference_here_and_says_so(
    cache_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kforge_worker.reference_process as reference_process

    def refuse(spec):
        raise OSError("no processes left")

    monkeypatch.setattr(reference_process, "ReferenceProcess", refuse)
    result, _ = evaluate(_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, True, timing=True))
    assert result["verdict"] == "correct"
    check = next(c for c in result["checks"] if c["name"] == "reference_isolation")
    assert check["outcome"] == "warn" and "no processes left" in check["evidence"]
    assert result["timing"]["inputs"]["reference"] == "in_process"


def test_the_cuda_ipc_description_round_trips_every_field_in_order(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CUDA path cannot run here; its plumbing can: what _share_cuda_ returns travels as JSON (bytes as
    base64) and reaches _new_shared_cuda in torch's order, and the tensor is rebuilt from the storage offset,
    shape and strides. A CPU storage stands in for the shared allocation."""
    import kforge_worker.reference_process as rp

    backing = torch.arange(24, dtype=torch.float32)
    view = backing[4:].view(4, 5).t()  # storage offset 4, transposed
    fields = (0, b"\x01handle\xff", backing.untyped_storage().nbytes(), 0, b"refcount", 7, b"\x00event", True)

    class FakeStorage:
        def _share_cuda_(self):
            return fields

    class Shared:
        def __init__(self, t):
            self.t = t

        def untyped_storage(self):
            return FakeStorage()

        def storage_offset(self):
            return self.t.storage_offset()

    ipc = rp._share_cuda(Shared(view))
    import json

    ipc = json.loads(json.dumps(ipc))  # it crosses the pipe as JSON
    opened = []

    def new_shared_cuda(*args):
        opened.append(args)
        return backing.untyped_storage()

    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", staticmethod(new_shared_cuda), raising=False)
    monkeypatch.setattr(torch.cuda, "_lazy_init", lambda: None)
    desc = {"name": "out0", "kind": "cuda_ipc", "ipc": ipc, "dtype": "float32", "shape": [5, 4], "stride": [1, 5],
            "numel": 20, "device": "cpu"}
    importer = rp.Importer()
    got = importer.view(desc)
    assert opened == [fields]  # device, handle, size, offset, ref-counter handle/offset, event handle, sync flag
    assert torch.equal(got, view) and got.stride() == (1, 5)
    importer.view(desc)
    assert len(opened) == 1  # one open per handle and name
    importer.forget("out")
    importer.view(desc)
    assert len(opened) == 2


def test_inputs_the_transport_cannot_carry_leave_the_reference_here_and_say_so(cache_dir: str, tmp_path) -> None:
    """A tuple of ints arrives as a tuple; a value that is neither a tensor nor JSON (a dtype here) makes the
    reference process decline the trial, and the run goes on with the reference in the worker."""
    source = (
        "import torch, torch.nn as nn\n"
        "class Model(nn.Module):\n"
        "    def forward(self, x, dims, kind):\n"
        "        assert isinstance(dims, tuple), type(dims)\n"
        "        return x.sum(dim=dims).to(kind)\n"
        "def get_inputs():\n    return [torch.randn(4, 3, 2), (1, 2), KIND]\n"
        "def get_init_inputs():\n    return []\n"
    )
    ident = tmp_path / "ident.py"
    ident.write_text("import torch.nn as nn\nclass ModelNew(nn.Module):\n"
                     "    def forward(self, x, dims, kind):\n        return x.sum(dim=dims).to(kind)\n")
    plain = tmp_path / "plain.py"
    plain.write_text(source.replace("KIND", "'float64'").replace(".to(kind)", ".double()"))
    ident_plain = tmp_path / "ident_plain.py"
    ident_plain.write_text(ident.read_text().replace(".to(kind)", ".double()"))
    result, _ = evaluate(_request(str(plain), str(ident_plain), cache_dir, True))
    assert result["verdict"] == "correct", result["reason"]
    assert next(c for c in result["checks"] if c["name"] == "reference_isolation")["outcome"] == "pass"

    odd = tmp_path / "odd.py"
    odd.write_text(source.replace("KIND", "torch.float64"))
    result, _ = evaluate(_request(str(odd), str(ident), cache_dir, True, timing=True))
    assert result["verdict"] == "correct", result["reason"]
    check = next(c for c in result["checks"] if c["name"] == "reference_isolation")
    assert check["outcome"] == "warn" and "input 2 is a dtype" in check["evidence"]
    assert result["timing"]["inputs"]["reference"] == "in_process"
    assert result["trials"][0]["outputs"][0]["refVsFp64"]["relL2"] is not None  # the worker's float64 copy


def test_a_reference_changed_after_the_trials_is_caught_before_timing(cache_dir: str, tmp_path) -> None:
    """The candidate replaces the problem's Model.forward only once its own trials are done (its 3rd call):
    every trial agreed, and the runtime checks would then compare against the changed reference. The probe
    after the verification stage compares the worker's reference with the clean one again."""
    late = tmp_path / "late_tamper.py"
    late.write_text(
        "import sys, torch, torch.nn as nn\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, i, o):\n        super().__init__()\n        self.fc = nn.Linear(i, o)\n"
        "        self.calls = 0\n"
        "    def forward(self, x):\n"
        "        self.calls += 1\n"
        "        if self.calls == 3:\n"
        "            for m in list(sys.modules.values()):\n"
        "                model = getattr(m, 'Model', None)\n"
        "                if callable(getattr(m, 'get_inputs', None)) and isinstance(model, type) and model is not nn.Module:\n"
        "                    model.forward = lambda self, x: torch.zeros(x.shape[0], 8)\n"
        "        return torch.relu(self.fc(x))\n"
    )
    result, _ = evaluate(_request(problem("tiny_linear"), str(late), cache_dir, True, trials=3))
    assert result["verdict"] == "cheating", result["reason"]
    assert result["reason"].startswith("reference_isolation: the reference in the candidate's process answers "
                                       "differently from the clean reference process (after the verification checks")
    assert all(t["passed"] for t in result["trials"])


_BREAKS_LINEAR = (
    "import torch\nimport torch.nn as nn\n"
    "def _refuse(self, *args, **kwargs):\n    raise RuntimeError('device unusable')\n"
    "nn.Linear.__init__ = _refuse  # what the import leaves behind: the problem's own Model cannot be built here\n"
    "class ModelNew(nn.Module):\n"
    "    def __init__(self, i, o):\n        super().__init__()\n        self.w = nn.Parameter(torch.randn(o, i))\n"
    "    def forward(self, x):\n        return torch.relu(x @ self.w.t())\n"
)


@pytest.mark.parametrize("isolated", [True, False])
def test_a_problem_broken_by_the_candidates_import_is_charged_to_the_candidate(cache_dir: str, tmp_path,
                                                                               isolated: bool) -> None:
    path = tmp_path / "breaks_linear.py"
    path.write_text(_BREAKS_LINEAR)
    result = _restoring_linear(lambda: evaluate(_request(problem("tiny_linear"), str(path), cache_dir, isolated))[0])
    if isolated:  # the clean process built Model: the failure here is the candidate's doing
        assert result["verdict"] == "runtime_error", result["reason"]
        assert "after the candidate was imported" in result["reason"] and "device unusable" in result["reason"]
    else:  # one process cannot tell a broken problem from a problem broken by the candidate
        assert result["verdict"] == "problem_error", result["reason"]


def test_tampering_found_before_a_later_failure_still_decides(cache_dir: str, tmp_path) -> None:
    """The fingerprint taken after the import names the replaced method, though the run failed building the
    models: cheating, not a runtime or problem error."""
    path = tmp_path / "breaks_linear.py"
    path.write_text(_BREAKS_LINEAR)
    for isolated in (True, False):
        result = _restoring_linear(lambda i=isolated: evaluate(
            _request(problem("tiny_linear"), str(path), cache_dir, i), use_checks=True)[0])
        assert result["verdict"] == "cheating", (isolated, result["reason"])
        failing = {c["name"] for c in result["checks"] if c["outcome"] == "fail"}
        assert {"harness_integrity", "static_tamper"} <= failing, failing


def _restoring_linear(run):
    """The pipeline runs in this test process: the candidate's patch of nn.Linear is undone after it."""
    import torch.nn as nn

    original = nn.Linear.__init__
    try:
        return run()
    finally:
        nn.Linear.__init__ = original


def _stop_and_continue(pid: int) -> None:
    import signal
    import time

    os.kill(pid, signal.SIGSTOP)
    time.sleep(0.05)
    os.kill(pid, signal.SIGCONT)
    time.sleep(0.2)  # the child's SIGCONT handler runs


def test_stops_before_the_candidates_go_are_not_counted_the_ones_after_are(cache_dir: str) -> None:
    """A suite stops a worker started ahead (its reference included) while the GPU times another candidate; the
    worker arms its reference when its go comes. Stops before the arm are nobody's attack, stops after it are
    reported with every call; the arm cannot be repeated nor come after the first other request."""
    ref = ReferenceProcess({"problemPath": problem("tiny_linear"), "device": "cpu", "dtype": None, "seed": 3,
                            "allowTf32": False, "fp64": True})
    try:
        ref.info  # noqa: B018 — started: the handler is installed
        _stop_and_continue(ref.proc.pid)
        assert ref.request("arm")["continued"] == 0
        ref.request("pool", sets=2)
        assert ref.request("call", timed=False)["continued"] == 0
        _stop_and_continue(ref.proc.pid)
        assert ref.request("call", timed=False)["continued"] == 1
        with pytest.raises(ReferenceProcessError, match="armed once"):
            ref.request("arm")
    finally:
        ref.close()

    late = ReferenceProcess({"problemPath": problem("tiny_linear"), "device": "cpu", "dtype": None, "seed": 3,
                             "allowTf32": False, "fp64": True})
    try:
        late.trial(11)
        _stop_and_continue(late.proc.pid)
        with pytest.raises(ReferenceProcessError, match="armed once"):
            late.request("arm")  # after a trial: too late to forget anything
        late.request("pool", sets=2)
        assert late.request("call", timed=False)["continued"] == 1
    finally:
        late.close()
