"""The judge in the clean reference process (kforge_worker/judge.py): its comparisons, its channel, the CLI's rule.

The worker's own comparisons run where the candidate's code runs; these tests widen the worker's tolerance or
forge its sampler from candidate code (the checks off, so nothing else in the worker interferes) and show that
the judge's record, written by a process that never imported the candidate on a socket the worker has closed,
still says what the outputs were — and that the reconciliation turns the worker's `correct` into `cheating`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sys

import pytest
import torch
from conftest import REPO, candidate, evaluate, make_request, problem

from kforge_worker.judge import Judge, JudgeChannel, JudgeInputError, judgement_failure, reconcile, summarize
from kforge_worker.reference_process import Exporter

_spec = importlib.util.spec_from_file_location("kforge_verify_corpus_judge", REPO / "test" / "verify" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = corpus
_spec.loader.exec_module(corpus)  # type: ignore[union-attr]


def _judged(request: dict) -> tuple[dict, list[str], str]:
    """The pipeline run in this process with a judge channel, as the CLI gives one; (result, lines, nonce)."""
    channel = JudgeChannel()
    request["options"]["judgeFd"] = channel.child_fd
    result, _ = evaluate(request)
    channel.child_closed = True  # the pipeline closed it (spawn_reference): the number may be another file's now
    return result, channel.finish(), channel.nonce


WIDEN = """
import sys
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc = nn.Linear(i, o)
        self.done = False

    def forward(self, x):
        if not self.done:
            frame = sys._getframe(0)
            while frame is not None:
                ctx = frame.f_locals.get("ctx")
                if ctx is not None and hasattr(ctx, "atol"):
                    ctx.atol = ctx.rtol = 1e9
                    self.done = True
                    break
                frame = frame.f_back
        return torch.relu(self.fc(x)) + 0.5
"""


def test_a_tolerance_widened_in_the_worker_leaves_the_judges_own(cache_dir: str, tmp_path) -> None:
    path = tmp_path / "widen.py"
    path.write_text(WIDEN)
    result, lines, nonce = _judged(make_request(problem("tiny_linear"), str(path), cache_dir, trials=3))
    assert result["verdict"] == "correct"  # the worker was fooled: every comparison there used 1e9
    record = summarize(lines, nonce)
    assert record["channel"] == "ok" and record["mode"] == "process"
    assert record["tolerance"] == {"atol": 1e-4, "rtol": 1e-4}
    assert [t["passed"] for t in record["trials"]] == [False, False, False]
    reconciled = reconcile(dict(result), lines, nonce, warmup=2)
    assert reconciled["verdict"] == "cheating"
    assert "trial 0 failed" in reconciled["reason"] and reconciled["reason"].startswith("judge_record:")


SAMPLER = """
import gc
import sys
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc = nn.Linear(i, o)
        self.forged = False

    def forward(self, x):
        if x._version > 0:  # timed: the inputs are rewritten in place before each pair
            if not self.forged:
                frame = sys._getframe(0)
                while frame is not None:
                    sampler = frame.f_locals.get("sampler")
                    if sampler is not None and hasattr(sampler, "compare"):
                        sampler.compare = lambda cand, ref: (True, None)
                        self.forged = True
                        break
                    frame = frame.f_back
            return torch.zeros(x.shape[0], self.fc.out_features)
        return torch.relu(self.fc(x))
"""


def test_a_forged_sampler_in_the_worker_does_not_forge_the_judges_samples(cache_dir: str, tmp_path) -> None:
    path = tmp_path / "sampler.py"
    path.write_text(SAMPLER)
    request = make_request(problem("tiny_linear"), str(path), cache_dir, trials=2, timing=True, min_iters=10,
                           max_iters=12)
    result, lines, nonce = _judged(request)
    assert result["verdict"] == "correct", result["reason"]
    assert result["timing"]["inputs"]["wrong"] == 0  # the worker's own samples all "right"
    record = summarize(lines, nonce)
    assert record["end"]["calls"] == record["end"]["commits"] == 2 + result["timing"]["ref"]["n"]
    assert record["end"]["wrong"] >= 1 and record["samples"][0]["ok"] is False
    assert reconcile(dict(result), lines, nonce, warmup=2)["verdict"] == "cheating"


CLOCK = """
import sys
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc = nn.Linear(i, o)
        self.done = 0

    def forward(self, x):
        if x._version > 0:  # timed: the timing loop's list of the candidate's times, shrunk as it grows
            frame = sys._getframe(0)
            while frame is not None:
                times = frame.f_locals.get("cand_ms")
                if isinstance(times, list):
                    for i in range(self.done, len(times)):
                        times[i] /= 20.0
                    self.done = len(times)
                    break
                frame = frame.f_back
        return torch.relu(self.fc(x))
"""


def test_candidate_times_shrunk_in_the_worker_are_not_the_ones_handed_to_the_judge(cache_dir: str, tmp_path) -> None:
    path = tmp_path / "clock.py"
    path.write_text(CLOCK)
    request = make_request(problem("tiny_linear"), str(path), cache_dir, trials=2, timing=True, min_iters=12,
                           max_iters=14)
    result, lines, nonce = _judged(request)
    assert result["verdict"] == "correct", result["reason"]  # right answers: the worker sees nothing wrong
    end = summarize(lines, nonce)["end"]
    assert end["candTimed"] == result["timing"]["cand"]["n"]
    assert end["candMedianMs"] > 5 * result["timing"]["cand"]["medianMs"]  # the judge holds the real times
    reconciled = reconcile(dict(result), lines, nonce, warmup=2)
    assert reconciled["verdict"] == "cheating" and "candidate's times in the result" in reconciled["reason"]


def test_an_honest_run_is_judged_the_same_in_both_places(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, trials=3, timing=True,
                           min_iters=10, max_iters=12)
    result, lines, nonce = _judged(request)
    assert result["verdict"] == "correct", result["reason"]
    record = summarize(lines, nonce)
    assert record["channel"] == "ok" and all(t["passed"] for t in record["trials"]) and len(record["trials"]) == 3
    end = record["end"]
    assert end["trialsGiven"] == end["trialsJudged"] == 3 and end["failures"] == []
    assert end["calls"] == end["commits"] == 2 + result["timing"]["ref"]["n"] and end["sampled"] >= 6
    assert end["refTimed"] == result["timing"]["ref"]["n"] and end["refMedianMs"] == result["timing"]["ref"]["medianMs"]
    assert end["candTimed"] == result["timing"]["cand"]["n"] and end["speedup"] == result["timing"]["speedup"]
    reconciled = reconcile(dict(result), lines, nonce, warmup=2)
    assert reconciled["verdict"] == "correct" and reconciled["judge"]["pid"] != os.getpid()


def test_active_dropout_keeps_the_reference_in_the_worker_and_the_judge_says_so(cache_dir: str) -> None:
    request = make_request(problem("tiny_dropout"), candidate("dropout_correct"), cache_dir, trials=2)
    result, lines, nonce = _judged(request)
    assert result["verdict"] == "correct", result["reason"]
    record = summarize(lines, nonce)
    assert record["channel"] == "ok" and record["mode"] == "in_worker" and "dropout" in record["why"]
    assert record["trials"] == [] and reconcile(dict(result), lines, nonce, 2)["verdict"] == "correct"


def test_inputs_the_reference_process_cannot_hand_over_are_declined_by_the_judge_itself(cache_dir: str, tmp_path) -> None:
    """A torch.dtype among get_inputs()' values: the reference stays in the worker (as before), and the judge — not
    the worker — says so; nothing of its own is then expected."""
    prob = tmp_path / "dtype_input.py"
    prob.write_text("import torch\nimport torch.nn as nn\n"
                    "class Model(nn.Module):\n    def forward(self, x, dtype):\n        return (x * 2).to(dtype)\n"
                    "def get_inputs():\n    return [torch.randn(4, 3), torch.float32]\n"
                    "def get_init_inputs():\n    return []\n")
    cand = tmp_path / "dtype_cand.py"
    cand.write_text("import torch.nn as nn\n"
                    "class ModelNew(nn.Module):\n    def forward(self, x, dtype):\n        return (x + x).to(dtype)\n")
    result, lines, nonce = _judged(make_request(str(prob), str(cand), cache_dir, trials=2))
    assert result["verdict"] == "correct", result["reason"]
    record = summarize(lines, nonce)
    assert record["channel"] == "ok" and record["mode"] == "in_worker" and "input 1" in record["why"]
    assert record["trials"] == [] and reconcile(dict(result), lines, nonce, 2)["verdict"] == "correct"


def test_the_worker_holds_no_descriptor_onto_the_judges_channel_when_the_candidate_is_imported(tmp_path) -> None:
    """A real worker process (the corpus runner's way, as the CLI spawns it): the candidate lists its process's
    descriptors at import; none is the socket the judge writes on, and the judge's record is whole."""
    marker = tmp_path / "sockets.json"
    spy = tmp_path / "fd_spy.py"
    spy.write_text(
        "import json, os, stat\nimport torch.nn as nn\nfound = []\n"
        "for name in os.listdir('/proc/self/fd'):\n"
        "    try:\n        st = os.fstat(int(name))\n    except OSError:\n        continue\n"
        "    if stat.S_ISSOCK(st.st_mode):\n        found.append(st.st_ino)\n"
        f"open({str(marker)!r}, 'w').write(json.dumps(found))\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, i, o):\n        super().__init__()\n        self.fc = nn.Linear(i, o)\n"
        "    def forward(self, x):\n        return self.fc(x)\n")
    seen: dict = {}
    real_channel = corpus._judge_channel

    def spying() -> JudgeChannel:
        made = real_channel()
        seen["ino"] = os.fstat(made.child_fd).st_ino
        seen["channel"] = made
        return made

    corpus._judge_channel = spying
    try:
        outcome = corpus.run_entry_worker({"id": "fd_spy", "problem": str(problem("tiny_linear")),
                                           "candidate": str(spy), "expect": "correct", "check": None}, "cpu",
                                          timing=False)
    finally:
        corpus._judge_channel = real_channel
    inodes = json.loads(marker.read_text())
    assert seen["ino"] not in inodes
    assert outcome.result["judge"]["channel"] == "ok" and outcome.result["judge"]["end"]["trialsJudged"] == 5


# ------------------------------------------------------------------------------- the judge on its own
def _judge(tmp_path, rng: random.Random | None = None) -> tuple[Judge, JudgeChannel]:
    channel = JudgeChannel()
    judge = Judge(channel.child_fd, str(tmp_path / "own"), rng=rng)
    judge.start(os.getpid(), dropout=False)
    judge.atol = judge.rtol = 1e-4
    return judge, channel


def _handed(tmp_path, tensors: list[torch.Tensor]) -> list[dict]:
    os.makedirs(tmp_path, exist_ok=True)
    exporter = Exporter(str(tmp_path))
    return [{"tensor": exporter.put(f"cand{i}", t.contiguous(), staging=True)} for i, t in enumerate(tensors)]


def test_timed_outputs_are_copied_before_the_draw_and_each_pair_is_handed_over_once(tmp_path) -> None:
    order: list[str] = []

    class Spy(random.Random):
        def random(self) -> float:
            order.append("draw")
            return 0.0  # always sampled

    judge, channel = _judge(tmp_path, Spy())
    receive = judge.receive

    def spy_receive(*args, **kw):
        order.append("copy")
        return receive(*args, **kw)

    judge.receive = spy_receive  # type: ignore[method-assign]
    last = [torch.randn(4, 3)]
    judge.called()
    judge.commit(_handed(tmp_path, [last[0].clone()]), last, torch.device("cpu"))
    assert order == ["copy", "draw"]
    judge.commit(_handed(tmp_path, [last[0].clone()]), last, torch.device("cpu"))  # the same pair again
    judge.called()  # a pair never handed over
    judge.called()
    judge.commit(_handed(tmp_path, [torch.zeros(4, 3)]), last, torch.device("cpu"))
    judge.end()
    record = summarize(channel.finish(), channel.nonce)
    end = record["end"]
    assert end["calls"] == 3 and end["commits"] == 2 and end["sampled"] == 2 and end["wrong"] == 1
    assert any("handed over twice" in f for f in end["failures"])
    assert any("1 of 3 pairs" in f for f in end["failures"])


def test_the_judge_copies_files_it_can_trust_and_refuses_the_rest(tmp_path) -> None:
    judge, channel = _judge(tmp_path)
    ref = [torch.randn(8, 5)]
    cpu = torch.device("cpu")
    good = _handed(tmp_path / "w", [ref[0].t().contiguous().t()])  # strided in the worker, row-major here
    assert torch.equal(judge.receive(good, ref, cpu)[0], ref[0])
    with pytest.raises(JudgeInputError, match="shape"):
        judge.receive(_handed(tmp_path / "w", [torch.randn(5, 8)]), ref, cpu)
    with pytest.raises(JudgeInputError, match="1 output tensor"):
        judge.receive(good, ref + ref, cpu)
    short = _handed(tmp_path / "s", [ref[0]])
    os.truncate(short[0]["tensor"]["path"], 16)  # truncated after it was written: a short read, never a SIGBUS
    with pytest.raises(JudgeInputError, match="16 bytes"):
        judge.receive(short, ref, cpu)
    own = _handed(tmp_path / "own", [ref[0]])  # a file in the reference process's own directory
    with pytest.raises(JudgeInputError, match="own file"):
        judge.receive(own, ref, cpu)
    forged = [{"tensor": {**good[0]["tensor"], "dtype": "Tensor"}}]
    with pytest.raises(JudgeInputError, match="dtype"):
        judge.receive(forged, ref, cpu)
    judge.end()
    channel.finish()


# ------------------------------------------------------------------------------- the CLI's rule
def _lines(nonce: str, *events: dict) -> list[str]:
    return [json.dumps({"type": "judge", "nonce": nonce, "seq": i, **e}) for i, e in enumerate(events)]


def _result(trials: int = 2, timed: int | None = None, where: str = "process", median: float = 1.0,
            cand_median: float = 0.5) -> dict:
    timing = None if timed is None else {"ref": {"n": timed, "medianMs": median},
                                         "cand": {"n": timed, "medianMs": cand_median},
                                         "speedup": median / cand_median, "inputs": {"reference": where}}
    return {"verdict": "correct", "reason": None, "checks": [], "trials": [{}] * trials, "timing": timing}


END = {"event": "end", "mode": "process", "trialsGiven": 2, "trialsJudged": 2, "trialsFailed": 0, "calls": 5,
       "commits": 5, "sampled": 5, "wrong": 0, "failures": [], "refTimed": 3, "refMedianMs": 1.0, "candTimed": 3,
       "candMedianMs": 0.5, "speedup": 2.0}
GOOD = ({"event": "hello", "pid": 7}, {"event": "start", "mode": "process"},
        {"event": "trial", "trial": 0, "passed": True}, {"event": "trial", "trial": 1, "passed": True}, END)


@pytest.mark.parametrize("case, lines, result, verdict", [
    ("whole and agreeing", _lines("n", *GOOD), _result(2, 3), "correct"),
    ("no line at all: no judge ran", [], _result(2, 3, "in_process"), "correct"),
    ("no line at all, though the result says the clean process timed the reference", [], _result(2, 3),
     "runtime_error"),
    ("a failed trial", _lines("n", *GOOD[:3], {"event": "trial", "trial": 1, "passed": False, "message": "m"}, END),
     _result(2, 3), "cheating"),
    ("a wrong sample", _lines("n", *GOOD[:4], {"event": "sample", "pair": 3, "ok": False}, END), _result(2, 3),
     "cheating"),
    ("another nonce", _lines("n", *GOOD[:4]) + _lines("x", END)[-1:], _result(2, 3), "cheating"),
    ("a record repeated", _lines("n", *GOOD) + [_lines("n", *GOOD)[2]], _result(2, 3), "cheating"),
    ("not JSON", _lines("n", *GOOD) + ["{oops"], _result(2, 3), "cheating"),
    ("no end: cannot be judged", _lines("n", *GOOD[:4]), _result(2, 3), "runtime_error"),
    ("fewer trials judged than reported", _lines("n", *GOOD), _result(4, 3), "cheating"),
    ("timed beside the candidate though the judge held the reference", _lines("n", *GOOD),
     _result(2, 3, "in_process"), "cheating"),
    ("pairs the judge never saw", _lines("n", *GOOD), _result(2, 9), "cheating"),
    ("the reference's times not the ones it measured", _lines("n", *GOOD), _result(2, 3, median=3.0), "cheating"),
    ("the candidate's times not the ones handed over", _lines("n", *GOOD), _result(2, 3, cand_median=0.05),
     "cheating"),
    ("a judge that was handed no candidate times", _lines("n", *GOOD[:4], {**END, "candTimed": 0,
                                                                          "candMedianMs": None, "speedup": None}),
     _result(2, 3), "cheating"),
])
def test_the_clis_rule(case: str, lines: list[str], result: dict, verdict: str) -> None:
    assert reconcile(result, lines, "n", warmup=2)["verdict"] == verdict, case


def test_a_forged_record_makes_even_a_failed_run_cheating_and_a_failed_run_is_left_alone() -> None:
    incorrect = {**_result(2, None), "verdict": "incorrect", "reason": "trial 0"}
    bad_trial = _lines("n", *GOOD[:2], {"event": "trial", "trial": 0, "passed": False}, END)
    assert reconcile(dict(incorrect), bad_trial, "n", 2)["verdict"] == "incorrect"
    assert reconcile(dict(incorrect), ["forged"], "n", 2)["verdict"] == "cheating"
    assert judgement_failure(summarize(_lines("n", *GOOD), "n"), _result(2, 3), 2) is None


def test_an_output_that_cannot_be_handed_over_is_a_wrong_answer_for_the_judge_not_a_harness_failure(tmp_path) -> None:
    from kforge_worker.reference_process import ReferenceProcess

    worker = ReferenceProcess.__new__(ReferenceProcess)  # only its hand-over: no process
    worker.handover = None
    items = worker._hand_over([torch.empty(2, 3, device="meta"), torch.ones(2, 3)])
    assert items[0]["value"] is None and "meta" in items[0]["why"] and "tensor" in items[1]
    judge, channel = _judge(tmp_path)
    with pytest.raises(JudgeInputError, match="output 0: not handed over as a tensor"):
        judge.receive(items, [torch.ones(2, 3), torch.ones(2, 3)], torch.device("cpu"))
    judge.end()
    channel.finish()
    import shutil

    shutil.rmtree(worker.handover.directory, ignore_errors=True)


def test_outputs_staged_in_one_cuda_segment_are_read_each_from_its_own_offset(monkeypatch):
    """Two outputs' staging buffers (a bool mask and an int64 count) are blocks of one cudaMalloc segment: one IPC
    handle, two offsets. The judge's cache was keyed by the handle alone and read output 1 from output 0's
    mapping — honest candidates with two outputs were `cheating` on the H200 (judge_record: 7.2e16 vs 95; "resize
    storage that is not resizable"). Mapped here by a stand-in for torch's IPC open, on the CPU."""
    import base64

    segment = torch.zeros(64, dtype=torch.uint8)
    mask, count = torch.tensor([True, False, True]), torch.tensor([7, 9], dtype=torch.int64)
    segment[0:3] = mask.view(torch.uint8)
    segment[16:32] = count.view(torch.uint8)
    opened = []

    def open_shared(device, handle, size, offset, *rest):
        opened.append(offset)
        return segment[offset : offset + size].clone().untyped_storage()

    monkeypatch.setattr(torch.UntypedStorage, "_new_shared_cuda", staticmethod(open_shared))
    judge = Judge.__new__(Judge)  # its transport alone: no channel, no nonce
    judge._cuda, judge.own_directory = {}, None

    def desc(t: torch.Tensor, offset: int, size: int) -> dict:
        ipc = {"device": 0, "handle": base64.b64encode(b"one-segment").decode(), "sizeBytes": size,
               "offsetBytes": offset, "storageOffset": 0, "refCounterHandle": None, "refCounterOffset": 0,
               "eventHandle": None, "eventSyncRequired": False}
        return {"tensor": {"kind": "cuda_ipc", "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                           "numel": t.numel(), "ipc": ipc}}

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    got = judge.receive([desc(mask, 0, 3), desc(count, 16, 16)], [mask, count], torch.device("cuda"))
    assert torch.equal(got[0], mask) and torch.equal(got[1], count), got
    assert opened == [0, 16]


def test_reference_calls_slower_right_after_the_candidates_fail_the_judgement(tmp_path) -> None:
    from kforge_worker.judge import order_effect
    from kforge_worker.timing import candidate_first

    pairs = range(2, 42)  # two warm-up pairs first
    after = [candidate_first(p) for p in pairs]
    lingering = [3.0 if c else 1.0 for c in after]  # a kernel of the candidate's still running after it returned
    assert "right after the candidate's" in (order_effect(lingering, after) or "")
    hot = [1.015 if c else 1.0 for c in after]  # a device still hot from the candidate's call: not held against it
    assert order_effect(hot, after) is None
    tiny = [0.03 if c else 0.01 for c in after]  # below the floor: scheduling noise at microseconds
    assert order_effect(tiny, after) is None
    shared = [3.0 if (i // 2) % 2 else 1.0 for i in range(len(after))]  # a shared GPU's noise, both kinds alike
    assert order_effect(shared, after) is None
    judge, _ = _judge(tmp_path)
    for p in range(42):
        judge.called(None if p < 2 else (3.0 if candidate_first(p) else 1.0))
    judge.end()
    assert any("right after the candidate's" in f for f in judge.failures)
