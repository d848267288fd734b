"""The body of one Ray task: one evaluation in a fresh ``python -m kforge_worker`` process.

The task never evaluates in its own (long-lived, shared) Ray worker process: it spawns the same isolated
worker a local run uses, in its own session (process group), so a crash, a CUDA fault, a hang or a process
the candidate leaves behind is contained and judged as it is locally. Ray pins the task to the GPU it granted
through CUDA_VISIBLE_DEVICES, which the spawned worker inherits: reference and candidate are timed on it.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

_STDERR_TAIL = 40


def _kill_group(pid: int) -> bool:
    """SIGKILL to the worker's process group; True when something was still alive in it."""
    try:
        os.killpg(pid, signal.SIGKILL)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _cache_dir(wanted: str) -> str:
    """The request's cache folder when this node can use it (same host, shared disk), else the node's own."""
    for path in (wanted, os.path.join(os.path.expanduser("~"), ".cache", "kforge")):
        try:
            os.makedirs(path, exist_ok=True)
            if os.access(path, os.W_OK):
                return path
        except OSError:
            continue
    return tempfile.gettempdir()


def localize(task: dict[str, Any], folder: str) -> dict[str, Any]:
    """The task's request with its files written under ``folder`` (this node may not share the caller's disk)."""
    request = json.loads(json.dumps(task["request"]))
    problem_path = os.path.join(folder, "problem.py")
    candidate_path = os.path.join(folder, "candidate.py")
    with open(problem_path, "w", encoding="utf-8") as f:
        f.write(task["problemSource"])
    with open(candidate_path, "w", encoding="utf-8") as f:
        f.write(task["candidateSource"])
    request["problem"]["path"] = problem_path
    request["candidate"]["path"] = candidate_path
    request["options"]["cacheDir"] = _cache_dir(request["options"]["cacheDir"])
    return request


def _read_lines(stream: Any, sink: Any) -> None:
    for raw in iter(stream.readline, b""):
        sink.append(raw.decode("utf-8", errors="replace").rstrip("\n"))


def run_isolated(task: dict[str, Any]) -> dict[str, Any]:
    """Runs the task's worker to completion (or its time limit) and returns the RayOutcome fields."""
    started = time.monotonic()
    folder = tempfile.mkdtemp(prefix="kforge-ray-")
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p),
        "PYTHONUNBUFFERED": "1",
        "KFORGE_SECRET_SEED": task["secret"],
    }
    judge = None
    try:
        request = localize(task, folder)
        # The task plays the CLI's part for the judge's channel (src/worker/judge.ts): a socket whose other end the
        # worker hands to its reference process, the nonce written here, the lines returned with the outcome.
        if request["options"].get("referenceProcess", True) is not False:
            from .judge import JudgeChannel

            judge = JudgeChannel()
            request["options"]["judgeFd"] = judge.child_fd
        proc = subprocess.Popen(
            [sys.executable, "-m", "kforge_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=folder,
            start_new_session=True,
            pass_fds=(judge.child_fd,) if judge is not None else (),
        )
        if judge is not None:
            judge.close_child_end()
        stdout: list[str] = []
        stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        readers = [
            threading.Thread(target=_read_lines, args=(proc.stdout, stdout), daemon=True),
            threading.Thread(target=_read_lines, args=(proc.stderr, stderr), daemon=True),
        ]
        for reader in readers:
            reader.start()
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the worker died at once; its exit status says how
        timed_out = False
        try:
            # Wait for the worker itself, not its pipes: a process the candidate forked may hold them open.
            proc.wait(timeout=float(task["timeoutSeconds"]))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc.pid)
            proc.wait()
        leftovers = not timed_out and _kill_group(proc.pid)
        for reader in readers:
            reader.join(timeout=10)
        judged = {"nonce": judge.nonce, "lines": judge.finish(10)} if judge is not None else None
        code = proc.returncode
        return {
            "stdout": stdout,
            "stderrTail": list(stderr),
            "timedOut": timed_out,
            "leftovers": leftovers,
            "signal": signal.Signals(-code).name if code is not None and code < 0 else None,
            "exitCode": code if code is not None and code >= 0 else None,
            "seconds": time.monotonic() - started,
            "node": socket.gethostname(),
            "judge": judged,
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)
