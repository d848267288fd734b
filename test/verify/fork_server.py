"""A fork server for the corpus: each entry's worker forked from a process that has already imported torch.

Every corpus entry runs in its own worker process, as `python -m kforge_worker` would, but a fresh
interpreter spends seconds of CPU importing torch, dynamo and sympy before it reads its request: over a
hundred entries on CI's two cores, that is minutes. This server imports those once (PRELOAD: only modules a
plain worker has imported before it imports the candidate; test_verify_corpus checks that against a real
worker), then for each job forks a child that becomes the worker: its own session, the job's empty folder as
cwd (and on sys.path, as `python -m` has it), the request on fd 0, stdout and stderr into files of the job's
`io` folder, the entry's environment, then kforge_worker's own ``main`` and ``os._exit`` exactly as
``python -m kforge_worker`` ends.

What the checks rest on is unchanged: the worker still spawns its reference process as a fresh interpreter
(it never imports candidate code), and the candidate is imported by the forked worker, never by this server.
The environment switches a worker sets before its first torch import (OMP_WAIT_POLICY,
TORCHINDUCTOR_COMPILE_THREADS) are set here before this server's import, so the forked worker and the
reference process it starts see the same values.

Protocol (`python fork_server.py CONTROL_IN CONTROL_OUT`): one JSON line per job on CONTROL_IN,
{"cwd", "io", "env", "timeout", "judgeFd"}; one JSON line back on CONTROL_OUT when the child has ended,
{"pid", "status", "judge": {"nonce", "lines"}} (status: the exit code, -signal, or null when it was killed at the
timeout). With "judgeFd" the server plays the CLI's part for the judge's channel (kforge_worker/judge.py): a socket
whose other end the child gets at that descriptor number (the request names it), its nonce, its lines. One job at
a time; EOF ends the server.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
import traceback

# Third-party modules a plain worker has imported by the time it imports the candidate (most of its start-up).
# None of kforge_worker's own: a module of it evaluated here would carry this server's state, not the worker's
# (checks/integrity.py's sensitive paths name the importing process's pid, say); the child imports those itself.
PRELOAD = ["torch", "torch._dynamo", "sympy", "setuptools"]


def preload() -> None:
    # As evaluate() sets them before its own first torch import (the OpenMP runtime reads its policy at load).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    for name in PRELOAD:
        __import__(name)


def become_worker(job: dict, control: tuple[int, int], server_dir: str, judge_fd: int | None = None,
                  judge_ours: int | None = None) -> None:
    """In the forked child: set the process up as `python -m kforge_worker` in job["cwd"] would be, run it, exit."""
    code = 70
    try:
        os.setsid()
        for fd in control:
            os.close(fd)
        if judge_ours is not None:
            os.close(judge_ours)
        if judge_fd is not None and job.get("judgeFd") is not None and judge_fd != job["judgeFd"]:
            os.dup2(judge_fd, job["judgeFd"])  # inheritable, as a descriptor a CLI passes
            os.close(judge_fd)
        for fd, name, flags in ((0, "request.json", os.O_RDONLY),
                                (1, "stdout", os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, "stderr", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            opened = os.open(os.path.join(job["io"], name), flags, 0o600)
            os.dup2(opened, fd)
            os.close(opened)
        os.chdir(job["cwd"])
        os.environ.update(job.get("env") or {})
        # Python's `random` reseeds itself in a forked child; numpy's global generator does not, and a fresh
        # interpreter's is seeded from the OS: as it would be in a worker of its own.
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed()
        from kforge_worker import __main__ as worker_main

        # `python -m` puts the working directory first on sys.path, and the empty entry the corpus runner's
        # PYTHONPATH ends with is the working directory too: here both still name the server's own folder.
        sys.argv = [worker_main.__file__]
        sys.path[:] = [os.getcwd()] + [os.getcwd() if p == server_dir else p for p in sys.path[1:]]
        code = worker_main.main([])
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 — the child must never return into the server's loop
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(code)


class _JudgeChannel:
    """kforge_worker.judge.JudgeChannel's part, written out here: this server imports nothing of kforge_worker (the
    forked worker must load its own modules as a fresh one does). The reading thread starts after the fork."""

    def __init__(self) -> None:
        import socket

        self.nonce = os.urandom(16).hex()
        self.ours, theirs = socket.socketpair()
        self.child_fd = theirs.detach()
        self.ours.sendall((self.nonce + "\n").encode())
        self.data = bytearray()
        self._thread = None

    def _read(self) -> None:
        try:
            while chunk := self.ours.recv(65536):
                self.data += chunk
        except OSError:
            pass

    def close_child_end(self) -> None:
        os.close(self.child_fd)

    def start_reading(self) -> None:
        import threading

        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def finish(self, timeout: float = 15.0) -> list[str]:
        if self._thread is not None:
            self._thread.join(timeout)
        self.ours.close()
        return bytes(self.data).decode("utf-8", errors="replace").splitlines()


def wait_for(pid: int, timeout: float) -> int | None:
    """The child's exit code (-signal when a signal ended it), or None when it was killed at `timeout`."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            left = deadline - time.monotonic()
            if left <= 0:
                try:
                    os.killpg(pid, signal.SIGKILL)  # the worker's session: it and whatever it left running
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                return None
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.02))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def serve(control_in: int, control_out: int) -> int:
    server_dir = os.getcwd()  # an empty folder of the server's own (ForkServer)
    preload()
    reader = os.fdopen(control_in, "r", encoding="utf-8")
    writer = os.fdopen(control_out, "w", encoding="utf-8")
    writer.write(json.dumps({"ready": True, "modules": sorted(sys.modules)}) + "\n")
    writer.flush()
    for line in reader:
        job = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        channel = _JudgeChannel() if job.get("judgeFd") is not None else None
        pid = os.fork()
        if pid == 0:
            become_worker(job, (control_in, control_out), server_dir,
                          channel.child_fd if channel is not None else None,
                          channel.ours.fileno() if channel is not None else None)
        judge = None
        if channel is not None:
            channel.close_child_end()
            channel.start_reading()
        status = wait_for(pid, float(job["timeout"]))
        if channel is not None:
            judge = {"nonce": channel.nonce, "lines": channel.finish()}
        writer.write(json.dumps({"pid": pid, "status": status, "judge": judge}) + "\n")
        writer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), int(sys.argv[2])))
