"""The verification corpus: load the manifest, run entries in fresh processes, judge the labels.

An entry passes when the verdict equals `expect` exactly and, for a non-clean entry, the named `check`
failed with that verdict (other checks may fail too: they are listed). Honest entries (`expect: correct`)
must have no failing check at all. An entry with `"device": "cpu"` runs on the CPU wherever the corpus runs
(its expectations assume the CPU, e.g. roofline ceilings given for it through `env`).

`expect`/`check` are the labels under the default policy (library and PyTorch operators disclosed). An entry
with a `strict` block ({"expect", "check"}) is run a second time with the request's `strict` option (the
CLI's --strict), as `<id>@strict`, and must get that label: e.g. a pure-PyTorch answer to a GEMM problem is
`correct` by default and `cheating` (banned_ops) under --strict.

An entry with `maxSpeedup` is a trick that the harness defeats rather than condemns (a memo that fresh inputs
never hit): it must be timed, and its measured speedup over the reference must not exceed that bound.

An entry with `caughtBy` (a list of {"expect", "check"}, its own `expect`/`check` first) is a cheat whose
first catching check depends on something outside the harness's control, e.g. which address the allocator
hands a fresh input (adv_cpp_static_cache): it passes when it is rejected (never `correct`) with one of the
listed verdicts and that pair's check failed. Only for such entries; the `strict` variant does not inherit it.

An entry with `"heavy": true` runs only in the corpus test's heavy set (`-m heavy`, with the entries that build or
time): a regression guard whose defence also has a unit test, kept out of CI's default run for its time.

Entries run through the real worker: `python -m kforge_worker` per entry (via="worker"), or the same worker
forked from a fork server that imported torch once (via="fork", the CPU test's way: fork_server.py), or
the standalone checks (via="standalone").
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "test", "verify", "manifest.json")


def load_manifest(path: str = MANIFEST) -> list[dict[str, Any]]:
    with open(path) as f:
        return json.load(f)["entries"]


def strict_variant(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry as judged under --strict, labelled by its `strict` block."""
    spec = entry["strict"]
    base = {k: v for k, v in entry.items() if k != "caughtBy"}
    return {**base, "id": f"{entry['id']}@strict", "expect": spec["expect"], "check": spec["check"], "mode": "strict"}


def labels(entry: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The (verdict, failing check) pairs the entry may get: its own, or its `caughtBy` list."""
    return [(c["expect"], c["check"]) for c in entry.get("caughtBy", [])] or [(entry["expect"], entry["check"])]


def with_strict_variants(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every entry, each followed by its --strict variant when it has one."""
    out: list[dict[str, Any]] = []
    for e in entries:
        out.append(e)
        if "strict" in e:
            out.append(strict_variant(e))
    return out


@dataclass
class Outcome:
    entry: dict[str, Any]
    verdict: str | None
    failing: list[str]
    reason: str | None
    seconds: float
    result: dict[str, Any] | None

    @property
    def speedup(self) -> float | None:
        timing = (self.result or {}).get("timing") or {}
        return timing.get("speedup")

    @property
    def miss(self) -> str | None:
        """Why the outcome does not match the entry's label, or None when it does."""
        entry, allowed = self.entry, labels(self.entry)
        expected = " or ".join(f"{v} ({c})" if c else v for v, c in allowed)
        if self.verdict not in {v for v, _ in allowed}:
            return f"{entry['id']}: expected {expected}, got {self.verdict} ({self.reason})"
        bound = entry.get("maxSpeedup")
        if bound is not None and (self.speedup is None or self.speedup > bound):
            return f"{entry['id']}: speedup {self.speedup} > {bound}"
        if self.verdict == "correct":
            return f"{entry['id']}: false flag(s) {self.failing}: {self.reason}" if self.failing else None
        if any(v == self.verdict and c in self.failing for v, c in allowed):
            return None
        return f"{entry['id']}: {self.verdict} but not by {expected}; failing {self.failing}"

    @property
    def ok(self) -> bool:
        return self.miss is None

    def row(self) -> dict[str, Any]:
        return {"id": self.entry["id"], "patterns": self.entry.get("patterns", []), "expected": self.entry["expect"],
                "got": self.verdict, "check": self.entry.get("check"), "failing": self.failing, "ok": self.ok,
                "reason": (self.reason or "")[:300], "seconds": round(self.seconds, 2), "speedup": self.speedup}


# The descriptor number the judge's channel has in a forked worker (fork_server.py puts it there), as the CLI's 4th
# stdio descriptor does.
FORK_JUDGE_FD = 3


def worker_request(entry: dict[str, Any], device: str, cache_dir: str, timing: bool,
                   judge_fd: int | None = None) -> dict[str, Any]:
    """An EvalRequest (src/worker/protocol.ts) for one entry, every verification check enabled; ``judge_fd``: the
    judge's channel (kforge_worker/judge.py), as the CLI gives one."""
    candidate = os.path.join(ROOT, entry["candidate"])
    return {
        "protocol": 1,
        "problem": {"path": os.path.join(ROOT, entry["problem"]), "name": os.path.basename(entry["problem"])[:-3],
                    "atol": None, "rtol": None},
        "candidate": {"path": candidate, "label": entry["id"],
                      "origin": {"kind": "file", "sourcePath": candidate, "blockIndex": None, "blockCount": None,
                                 "note": None}},
        "options": {"trials": 5, "seed": int.from_bytes(os.urandom(3), "little"), "precision": None, "device": device,
                    "timing": {"enabled": timing, "warmupIters": 5, "minIters": 40, "maxIters": 200,
                               "budgetSeconds": 4, "targetRelativeCi": 0.02},
                    "cacheDir": cache_dir, "checks": ["all"], "strict": entry.get("mode") == "strict",
                    **_reference_process_option(), **({"judgeFd": judge_fd} if judge_fd is not None else {})},
    }


def _reference_process_option() -> dict[str, Any]:
    """KFORGE_REFERENCE_PROCESS=1/0 forces the clean reference process on/off (the device script's
    --reference-process); unset leaves the worker's default for the device."""
    value = os.environ.get("KFORGE_REFERENCE_PROCESS")
    return {} if value is None else {"referenceProcess": value == "1"}


def run_entry_worker(entry: dict[str, Any], device: str = "cpu", timeout: float = 300, timing: bool | None = None,
                     python: str = sys.executable) -> Outcome:
    """Through the real worker (`python -m kforge_worker`, request on stdin, result on stdout)."""
    cache_dir = os.environ.get("KFORGE_VERIFY_CACHE", os.path.join(tempfile.gettempdir(), "kforge-verify-cache"))
    judge = _judge_channel() if _reference_process_option().get("referenceProcess", True) else None
    request = worker_request(entry, device, cache_dir, bool(timing if timing is not None else entry.get("time")),
                             judge.child_fd if judge is not None else None)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(entry.get("env", {}) if device == "cpu" else {})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kforge-verify-") as tmp:
        proc = subprocess.Popen([python, "-m", "kforge_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=tmp, env=env, text=True, start_new_session=True,
                                pass_fds=(judge.child_fd,) if judge is not None else ())
        try:
            stdout, stderr = proc.communicate(json.dumps(request), timeout=timeout)
        except subprocess.TimeoutExpired:
            where = _stack_before_kill(proc)
            if judge is not None:
                judge.finish(0)
            return Outcome(entry, "timeout", [], f"no result within {timeout}s{where}", timeout, None)
    lines = {"nonce": judge.nonce, "lines": judge.finish()} if judge is not None else None
    return _outcome_from_stdout(entry, stdout, stderr, proc.returncode, started, lines,
                                request["options"]["timing"]["warmupIters"])


def _stack_before_kill(proc: subprocess.Popen) -> str:
    """Asks a worker past its time limit for its stacks (SIGUSR1: kforge_worker.__main__.dump_stacks_on_request), kills
    its group, and returns where its main thread was ("; at FILE:LINE in FN <- ...", innermost first), or ""."""
    import re
    import signal

    try:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1.5)
    except OSError:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        return ""
    blocks = re.split(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$", stderr or "", flags=re.M)[1:]
    main = next((b for b in blocks if "kforge_worker/__main__.py" in b), blocks[0] if blocks else "")
    frames = re.findall(r'^\s+File "(.+)", line (\d+) in (.+)$', main, flags=re.M)[:3]
    return "; at " + " <- ".join(f"{os.path.basename(f)}:{line} in {fn}" for f, line, fn in frames) if frames else ""


def _judge_channel() -> Any:
    sys.path.insert(0, os.path.join(ROOT, "python")) if os.path.join(ROOT, "python") not in sys.path else None
    from kforge_worker.judge import JudgeChannel

    return JudgeChannel()


def _outcome_from_stdout(entry: dict[str, Any], stdout: str, stderr: str, returncode: int | None,
                         started: float, judge: dict[str, Any] | None = None, warmup: int = 0) -> Outcome:
    """The entry's Outcome from a worker's stdout (its protocol lines) and stderr; ``judge`` ({nonce, lines}): the
    judge's channel, reconciled with the result as the CLI does (kforge_worker.judge.reconcile)."""
    result = None
    for line in stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("type") == "result":
            result = message.get("result")
    if not isinstance(result, dict) or "verdict" not in result:
        tail = (stderr or "")[-800:]
        return Outcome(entry, "runtime_error", [], f"worker exited {returncode} without a result: {tail}",
                       time.perf_counter() - started, None)
    if judge is not None:
        sys.path.insert(0, os.path.join(ROOT, "python")) if os.path.join(ROOT, "python") not in sys.path else None
        from kforge_worker.judge import reconcile

        result = reconcile(result, judge["lines"], judge["nonce"], warmup)
    failing = [c["name"] for c in result.get("checks", []) if c["outcome"] == "fail"]
    return Outcome(entry, result["verdict"], failing, result.get("reason"), result.get("seconds", 0.0), result)


class ForkServer:
    """A handle on fork_server.py: runs one entry's worker at a time, forked from a process that has already
    imported torch (fork_server.py says what that keeps and what it saves)."""

    def __init__(self, python: str = sys.executable) -> None:
        job_read, self._job_write = os.pipe()
        self._reply_read, reply_write = os.pipe()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
        # Its own empty folder as cwd: the folder a worker's sys.path names for its cwd is the job's (fork_server.py).
        self._home = tempfile.TemporaryDirectory(prefix="kforge-fork-server-")
        self.proc = subprocess.Popen([python, os.path.join(ROOT, "test", "verify", "fork_server.py"), str(job_read),
                                      str(reply_write)], pass_fds=(job_read, reply_write), env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=self._home.name)
        os.close(job_read)
        os.close(reply_write)
        self._jobs = os.fdopen(self._job_write, "w", encoding="utf-8")
        self._replies = os.fdopen(self._reply_read, "r", encoding="utf-8")
        self._modules: list[str] | None = None  # read when first needed: several servers start side by side
        self.judge: dict[str, Any] | None = None  # the last run's judge channel: {nonce, lines}

    @property
    def modules(self) -> list[str]:
        """What the server had imported before its first fork (sys.modules' names)."""
        if self._modules is None:
            self._modules = self._reply()["modules"]
        return self._modules

    def _reply(self) -> dict[str, Any]:
        line = self._replies.readline()
        if not line:
            raise RuntimeError(f"the corpus fork server ended (exit status {self.proc.poll()})")
        return json.loads(line)

    def run(self, request: dict[str, Any], env: dict[str, str], timeout: float) -> tuple[str, str, int | None]:
        """(stdout, stderr, exit status: None when killed at `timeout`) of one worker run on `request`; the judge's
        channel of the run (or None) is left in ``self.judge``."""
        with tempfile.TemporaryDirectory(prefix="kforge-verify-") as tmp:
            cwd = os.path.join(tmp, "cwd")  # empty, as run_entry_worker's; the files stay outside it
            os.mkdir(cwd)
            with open(os.path.join(tmp, "request.json"), "w", encoding="utf-8") as f:
                f.write(json.dumps(request) + "\n")
            self.modules  # noqa: B018 — the server is ready
            self._jobs.write(json.dumps({"cwd": cwd, "io": tmp, "env": env, "timeout": timeout,
                                         "judgeFd": request["options"].get("judgeFd")}) + "\n")
            self._jobs.flush()
            reply = self._reply()
            status = reply["status"]
            self.judge = reply.get("judge")
            out = {}
            for name in ("stdout", "stderr"):
                try:
                    with open(os.path.join(tmp, name), encoding="utf-8", errors="replace") as f:
                        out[name] = f.read()
                except FileNotFoundError:  # the child died before it opened its files
                    out[name] = ""
        return out["stdout"], out["stderr"], status

    def close(self) -> None:
        self._jobs.close()
        self._replies.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._home.cleanup()


def run_entry_forked(entry: dict[str, Any], server: ForkServer, device: str = "cpu", timeout: float = 300,
                     timing: bool | None = None) -> Outcome:
    """As run_entry_worker, the worker forked by `server` instead of started as a fresh interpreter."""
    cache_dir = os.environ.get("KFORGE_VERIFY_CACHE", os.path.join(tempfile.gettempdir(), "kforge-verify-cache"))
    judging = _reference_process_option().get("referenceProcess", True)
    request = worker_request(entry, device, cache_dir, bool(timing if timing is not None else entry.get("time")),
                             FORK_JUDGE_FD if judging else None)
    started = time.perf_counter()
    stdout, stderr, status = server.run(request, entry.get("env", {}) if device == "cpu" else {}, timeout)
    if status is None:
        return Outcome(entry, "timeout", [], f"no result within {timeout}s", timeout, None)
    return _outcome_from_stdout(entry, stdout, stderr, status, started, server.judge,
                                request["options"]["timing"]["warmupIters"])


def run_entry(entry: dict[str, Any], device: str = "cpu", timeout: float = 300, timing: bool | None = None,
              python: str = sys.executable, via: str = "worker", server: ForkServer | None = None) -> Outcome:
    device = entry.get("device", device)
    if via == "fork":
        assert server is not None, "via='fork' runs through a ForkServer"
        return run_entry_forked(entry, server, device, timeout, timing)
    if via == "worker":
        return run_entry_worker(entry, device, timeout, timing, python)
    return run_entry_standalone(entry, device, timeout, timing, python)


def run_entry_standalone(entry: dict[str, Any], device: str = "cpu", timeout: float = 300,
                         timing: bool | None = None, python: str = sys.executable) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="kforge-verify-") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [python, "-m", "kforge_worker.checks.standalone", "--problem", os.path.join(ROOT, entry["problem"]),
               "--candidate", os.path.join(ROOT, entry["candidate"]), "--device", device, "--out", out]
        if timing if timing is not None else entry.get("time"):
            cmd.append("--time")
        if entry.get("mode") == "strict":
            cmd.append("--strict")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
        env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(tempfile.gettempdir(), "kforge-verify-extensions"))
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            return Outcome(entry, "timeout", [], f"no result within {timeout}s", timeout, None)
        if not os.path.exists(out):
            tail = (proc.stderr or "")[-800:]
            return Outcome(entry, "runtime_error", [], f"worker exited {proc.returncode} without a result: {tail}", 0.0,
                           None)
        with open(out) as f:
            result = json.load(f)
    failing = [c["name"] for c in result["checks"] if c["outcome"] == "fail"]
    return Outcome(entry, result["verdict"], failing, result.get("reason"), result.get("seconds", 0.0), result)


def run_all(entries: list[dict[str, Any]], device: str = "cpu", jobs: int = 2, **kwargs: Any) -> list[Outcome]:
    """Every entry, `jobs` at a time. via="fork": each job thread has its own ForkServer."""
    if kwargs.get("via") != "fork":
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(lambda e: run_entry(e, device, **kwargs), entries))
    python = kwargs.pop("python", sys.executable)
    servers: queue.Queue[ForkServer] = queue.Queue()
    started = [ForkServer(python) for _ in range(min(jobs, len(entries)))]
    for server in started:
        servers.put(server)

    def one(entry: dict[str, Any]) -> Outcome:
        server = servers.get()
        try:
            return run_entry(entry, device, server=server, **kwargs)
        finally:
            servers.put(server)

    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(one, entries))
    finally:
        for server in started:
            server.close()


def table(outcomes: list[Outcome]) -> str:
    lines = [f"{'entry':32} {'pat':>6} {'expected':10} {'got':14} {'check':22} ok", "-" * 92]
    for o in outcomes:
        r = o.row()
        pats = ",".join(str(p) for p in r["patterns"]) or "-"
        lines.append(f"{r['id'][:32]:32} {pats:>6} {r['expected']:10} {str(r['got']):14} {str(r['check'] or '-'):22} "
                     f"{'ok' if r['ok'] else 'MISS'}")
    good = sum(o.ok for o in outcomes)
    lines.append(f"{good}/{len(outcomes)} entries labelled as expected")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", default="")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--via", choices=["worker", "fork", "standalone"], default="worker")
    args = parser.parse_args()
    entries = [e for e in with_strict_variants(load_manifest()) if (args.device != "cpu" or e["cpu"])
               and os.path.exists(os.path.join(ROOT, e["candidate"]))
               and (not args.only or any(s in e["id"] for s in args.only.split(",")))]
    outcomes = run_all(entries, args.device, args.jobs, via=args.via)
    print(table(outcomes))
    for o in outcomes:
        if not o.ok:
            print(f"\n{o.entry['id']}: got {o.verdict}, failing {o.failing}\n  reason: {o.reason}")
