"""The body of a Ray task (ray_task.run_isolated), without Ray: it must run the same isolated worker a local
run does, from the task's own copies of the files, and report what the TS side needs to judge the run."""

from __future__ import annotations

import json
import os

import pytest

from conftest import assert_valid, candidate, make_request, problem

from kforge_worker.ray_driver import _outcome
from kforge_worker.ray_task import localize, run_isolated


def _task(request: dict, timeout: float = 120) -> dict:
    with open(request["problem"]["path"], encoding="utf-8") as f:
        problem_source = f.read()
    with open(request["candidate"]["path"], encoding="utf-8") as f:
        candidate_source = f.read()
    task = {"id": "7", "request": request, "problemSource": problem_source, "candidateSource": candidate_source,
            "timeoutSeconds": timeout, "secret": "12345"}
    # RayTask (ray-protocol.ts) is EvalRequest plus plain fields: the request is held to its own schema.
    assert_valid(request, "EvalRequest")
    return task


def test_the_task_runs_the_worker_on_its_own_copies_and_returns_its_protocol_lines(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, trials=2)
    outcome = run_isolated(_task(request))
    message = _outcome("7", outcome, None)
    assert_valid(message, "RayDriverMessage")
    assert outcome["timedOut"] is False and outcome["leftovers"] is False and outcome["exitCode"] == 0
    results = [json.loads(line) for line in outcome["stdout"] if '"type":"result"' in line]
    assert len(results) == 1
    assert results[0]["result"]["verdict"] == "correct", results[0]["result"]["reason"]
    # The task gave the worker the judge's channel as the CLI does, and returns what the reference process wrote.
    from kforge_worker.judge import summarize

    record = summarize(outcome["judge"]["lines"], outcome["judge"]["nonce"])
    assert record["channel"] == "ok" and record["end"]["trialsJudged"] == 2


def test_a_hanging_candidate_is_killed_at_the_task_limit(cache_dir: str, tmp_path) -> None:
    hang = tmp_path / "hang.py"
    hang.write_text("import time\ntime.sleep(600)\n")
    request = make_request(problem("tiny_linear"), str(hang), cache_dir)
    outcome = run_isolated(_task(request, timeout=3))
    assert outcome["timedOut"] is True
    assert outcome["seconds"] < 60


def test_localize_writes_the_sources_and_points_the_request_at_them(tmp_path) -> None:
    request = make_request(problem("tiny_add"), candidate("add_cpp_ok"), str(tmp_path / "unwritable" / "cache"))
    local = localize(_task(request), str(tmp_path))
    assert local["problem"]["path"] == os.path.join(str(tmp_path), "problem.py")
    with open(local["candidate"]["path"], encoding="utf-8") as f:
        assert "load_inline" in f.read()
    assert os.path.isdir(local["options"]["cacheDir"])
    assert request["problem"]["path"] != local["problem"]["path"], "the caller's request is not modified"


def test_under_ray_each_task_s_worker_runs_on_the_gpu_ray_granted(cache_dir: str, tmp_path) -> None:
    """Two Ray tasks asking for one GPU each (two GPUs declared, so no GPU is needed here): each spawned worker
    process sees only its own grant in CUDA_VISIBLE_DEVICES, so a candidate and its reference are timed on it."""
    ray = pytest.importorskip("ray")
    seen = tmp_path / "seen"
    seen.mkdir()
    # A problem that records, from inside the worker process, which GPU it was given.
    recorder = tmp_path / "records_gpu.py"
    source = open(problem("tiny_linear"), encoding="utf-8").read()
    recorder.write_text(
        source
        + "\nimport os as _os, uuid as _uuid\n"
        + f"open(_os.path.join({str(seen)!r}, _uuid.uuid4().hex), 'w').write(_os.environ.get('CUDA_VISIBLE_DEVICES', ''))\n",
        encoding="utf-8",
    )
    tasks = [_task(make_request(str(recorder), candidate("linear_correct"), cache_dir, trials=1)) for _ in range(2)]
    import kforge_worker

    # As ray_driver does: the worker package travels with the job.
    package = os.path.dirname(os.path.abspath(kforge_worker.__file__))
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={"py_modules": [package]})
    try:
        remote = ray.remote(run_isolated).options(num_gpus=1, num_cpus=1)
        outcomes = ray.get([remote.remote(task) for task in tasks])
    finally:
        ray.shutdown()
    assert all(o["exitCode"] == 0 and not o["timedOut"] for o in outcomes)
    grants = sorted(p.read_text() for p in seen.iterdir())
    # A worker may import the problem more than once (its checks do): every import saw its own grant.
    # Each saw exactly one of the two GPUs (never both, never none); which one is Ray's choice.
    assert grants and set(grants) <= {"0", "1"}, grants
