"""``python -m kforge_worker`` as the CLI runs it: a subprocess, JSON lines on stdout, logs on stderr.

These runs include the verification package with its runtime groups off (checks: ["none"]): its static
scan and integrity checks still run, as in every real evaluation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PYTHON_DIR, REPO, WorkerRun, assert_valid, candidate, make_request, problem, run_worker

QUIET = ["none"]


def test_worker_process_reports_a_correct_timed_candidate(cache_dir: str) -> None:
    run = run_worker(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, trials=5, timing=True, checks=QUIET))
    assert run.returncode == 0, run.stderr
    for message in run.messages:
        assert_valid(message)
    assert run.messages[-1]["type"] == "result"  # the result is the last line
    result = run.result
    assert result["verdict"] == "correct"
    assert result["environment"]["device"] == "cpu"
    assert result["environment"]["torch"] and result["environment"]["python"].count(".") == 2
    assert result["timing"]["ref"]["n"] >= 10
    # The reference's work, counted by the worker for rooflines: x (4x16) @ W^T (16->8); every input,
    # parameter and output once in fp32.
    assert result["workload"]["flops"] == 2 * 4 * 16 * 8
    assert result["workload"]["bytes"] == (4 * 16 + 8 * 16 + 8 + 4 * 8) * 4
    assert result["seconds"] > 0


def test_candidate_output_never_reaches_the_protocol_channel(cache_dir: str) -> None:
    run = run_worker(make_request(problem("tiny_linear"), candidate("noisy"), cache_dir, timing=True, checks=QUIET))
    assert run.returncode == 0
    lines = run.stdout.splitlines()
    assert all(json.loads(line)["type"] in ("progress", "result") for line in lines)
    # Forging protocol lines is itself a cheat the checks may name; either way the channel stays clean.
    assert run.result["verdict"] in ("correct", "cheating")
    assert not any("forged" in m for m in run.messages)  # the raw fd-1 write did not become a message
    assert isinstance(run.result, dict)  # exactly one result, ours: a print inside it would break its JSON
    progress = [line for line in lines if json.loads(line)["type"] == "progress"]
    for forged in ("forged at import", '"forged": true', "child process output", "forward called", "to sys.__stdout__"):
        assert not any(forged in line for line in progress)  # (check evidence may quote the source; not here)
        assert forged in run.stderr
    for message in run.messages:
        assert_valid(message)


def test_every_message_carries_the_requests_nonce(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, checks=QUIET)
    request["nonce"] = "5f0c7d9e1a2b3c4d5e6f708192a3b4c5"
    run = run_worker(request)
    assert run.result["verdict"] == "correct", run.result["reason"]
    assert run.messages and all(m.get("nonce") == request["nonce"] for m in run.messages)


def test_a_result_line_is_written_even_when_the_candidate_exits(cache_dir: str) -> None:
    run = run_worker(make_request(problem("tiny_linear"), candidate("sys_exit"), cache_dir, checks=QUIET))
    assert run.returncode == 0
    # The forward's SystemExit ends the trials (a runtime error); the static scan's finding that the candidate
    # exits the worker outranks it, as it would a correct run's verdict.
    assert run.result["verdict"] == "cheating"
    assert run.result["reason"].startswith("static_evasion") and "sys.exit" in run.result["reason"]
    assert_valid({"type": "result", "result": run.result})


def test_invalid_request_is_one_line_on_stderr_and_exit_2(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir)
    del request["options"]["trials"]
    run = run_worker(request)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.strip() == "kforge_worker: invalid request: request.options.trials: missing"
    garbage = run_worker(None)
    assert garbage.returncode == 2 and "invalid request" in garbage.stderr


def test_probe_describes_the_python_side() -> None:
    run = run_worker(None, ("--probe",))
    assert run.returncode == 0
    assert len(run.messages) == 1
    probe = run.messages[0]
    assert_valid(probe, "ProbeResult")
    assert probe["torch"] and probe["torchError"] is None
    assert probe["cudaAvailable"] in (True, False)
    assert "Traceback" not in run.stderr


def test_request_file_option(cache_dir: str, tmp_path) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps(make_request(problem("tiny_tuple"), candidate("tuple_correct"), cache_dir, checks=QUIET)))
    run = run_worker(None, ("--request", str(path)))
    assert run.result["verdict"] == "correct"


def test_a_broken_torch_is_reported_not_a_traceback(cache_dir: str, tmp_path) -> None:
    fake = tmp_path / "torch"  # shadows the real torch for the worker process
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('libcudart.so.13: cannot open shared object file')\n")
    probe = run_worker(None, ("--probe",), path_first=str(tmp_path))
    assert probe.returncode == 0 and "Traceback" not in probe.stderr
    (message,) = probe.messages
    assert_valid(message, "ProbeResult")
    assert message["torch"] is None
    assert message["torchError"] == "ImportError: libcudart.so.13: cannot open shared object file"
    run = run_worker(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir), path_first=str(tmp_path))
    assert run.result["verdict"] == "runtime_error"
    assert run.result["reason"].startswith("cannot import torch: ImportError: libcudart.so.13")
    assert_valid({"type": "result", "result": run.result})


def test_worker_logs_a_result_that_breaks_the_schema(capsys) -> None:
    from kforge_worker.__main__ import _warn_if_off_schema
    from kforge_worker.pipeline import initial_result
    from kforge_worker.request import parse_request

    result = initial_result(parse_request(make_request(problem("a"), candidate("b"), "/c")))
    _warn_if_off_schema(result)
    assert capsys.readouterr().err == ""
    result["checks"].append({"name": "x", "outcome": "maybe"})
    _warn_if_off_schema(result)
    err = capsys.readouterr().err
    assert "result does not match schemas/EvalResult.json" in err
    assert "$.checks[0].outcome" in err and "$.checks[0].evidence: missing" in err


def _start_gated(request: dict) -> subprocess.Popen:
    request["options"]["waitForGo"] = True
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR))
    proc = subprocess.Popen([sys.executable, "-m", "kforge_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(request) + "\n")
    proc.stdin.flush()
    return proc


def _until_ready(proc: subprocess.Popen) -> list[dict]:
    """Progress lines up to the worker's "ready" (it then waits for go without reading the candidate)."""
    seen = []
    for line in proc.stdout:  # type: ignore[union-attr]
        message = json.loads(line)
        seen.append(message)
        if message.get("stage") == "ready":
            return seen
    raise AssertionError(f"the worker ended before it was ready: {proc.stderr.read()[-2000:]}")  # type: ignore[union-attr]


def test_a_worker_started_ahead_reads_its_candidate_only_after_go(cache_dir: str, tmp_path: Path) -> None:
    # kforge optimize starts the eval while it is still writing the file: the bytes judged are those on disk at
    # go, not those at start (here the file does not exist until the worker is ready).
    target = tmp_path / "model_new.py"
    proc = _start_gated(make_request(problem("tiny_linear"), str(target), cache_dir, checks=QUIET))
    before = _until_ready(proc)
    assert [m["stage"] for m in before][-1] == "ready" and not target.exists()
    shutil.copyfile(candidate("linear_correct"), target)
    stdout, stderr = proc.communicate("go\n", timeout=300)
    run = WorkerRun(proc.returncode, stdout, stderr)
    assert run.result["verdict"] == "correct", run.result["reason"]
    for message in before + run.messages:
        assert_valid(message)


def test_a_worker_started_ahead_and_called_off_judges_nothing(cache_dir: str, tmp_path: Path) -> None:
    target = tmp_path / "model_new.py"
    shutil.copyfile(candidate("linear_correct"), target)
    proc = _start_gated(make_request(problem("tiny_linear"), str(target), cache_dir, checks=QUIET))
    _until_ready(proc)
    stdout, stderr = proc.communicate("", timeout=300)  # stdin closed without go
    run = WorkerRun(proc.returncode, stdout, stderr)
    assert run.result["verdict"] == "runtime_error" and "called off" in run.result["reason"]
    assert run.result["trials"] == []
