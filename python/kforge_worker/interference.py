"""Is the candidate's process quiet while the reference is being timed?

The reference is timed in its own process, on the same cores (CPU) or the same host (GPU launches). While
the worker waits for one of its timed calls, nothing in the worker should run: the harness's thread is
blocked on the reply, and the candidate's code is not being called. CPU time burned then by the worker's
*other* threads is the candidate's: a thread that spins to take cores from the reference (started lazily,
native or not, so no thread count sees it start), or work still running after forward returned. Either
makes the reference slower or the candidate faster than they are: `reference_interference` fails it. So
does a change to how the reference process is scheduled (its threads pinned to fewer cores, reniced): the
worker started it, so the candidate's process may change that too.

Measured as the process's CPU time less the calling thread's own, around each timed reference call — the
clocks are bound when this module is imported, before the candidate is."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

_process_time = time.process_time
_thread_time = time.thread_time
_perf_counter = time.perf_counter

# Other threads may use this share of the reference's wall time (an idle pool's wake-ups, a driver's thread)
SHARE = 0.2
# ... and this much in total over the whole timing, whatever the share (a few ms of housekeeping).
FLOOR_MS = 20.0


Scheduling = tuple[frozenset[int], int]  # (CPU affinity, niceness) of one thread


def scheduling(pid: int) -> dict[int, Scheduling]:
    """thread id -> (CPU affinity, niceness) for every thread of process `pid` (empty where /proc is absent)."""
    out: dict[int, Scheduling] = {}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return out
    for tid in tids:
        try:
            out[tid] = (frozenset(os.sched_getaffinity(tid)), os.getpriority(os.PRIO_PROCESS, tid))
        except OSError:  # the thread has just ended
            continue
    return out


def scheduling_change(baseline: Scheduling | None, now: dict[int, Scheduling]) -> str | None:
    """How the reference process's threads are scheduled now differs from how its main thread was when it
    was started (before the candidate existed), or None. Threads may be bound to single cores (an OpenMP
    binding), so the rule is on the union of their cores and on every thread's niceness: pinning the process
    to fewer cores, or lowering its priority, slows the reference from outside it."""
    if baseline is None or not now:
        return None
    cores, nice = baseline
    union = frozenset().union(*(a for a, _ in now.values()))
    if union != cores and not _openmp_binds():
        return (f"the reference process's threads may run on cores {sorted(union)}, not {sorted(cores)} as when it "
                "started")
    reniced = sorted(tid for tid, (_, n) in now.items() if n != nice)
    if reniced:
        return f"{len(reniced)} of the reference process's threads were reniced (niceness {nice} when it started)"
    return None


def _openmp_binds() -> bool:
    """An OpenMP thread binding asked for in the environment (the child inherits it) pins the reference's own
    threads, the main one included, to as many cores as its team has: the affinity rule cannot tell that from
    a pin, so only niceness is compared then."""
    return any(os.environ.get(k, "").strip().lower() not in ("", "false") for k in
               ("OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"))


class IdleMeter:
    def __init__(self) -> None:
        self.tampered: str | None = None  # the reference process's scheduling changed (scheduling_change)
        self.other_cpu_ms = 0.0
        self.wall_ms = 0.0
        self.calls = 0
        self.worst: tuple[float, float] = (0.0, 0.0)  # (other threads' CPU ms, wall ms) of the worst call

    def measure(self, call: Callable[[], Any]) -> Any:
        """Runs `call` (a reference call the worker only waits for) and books the other threads' CPU time."""
        proc, own, wall = _process_time(), _thread_time(), _perf_counter()
        try:
            return call()
        finally:
            other = ((_process_time() - proc) - (_thread_time() - own)) * 1e3
            span = (_perf_counter() - wall) * 1e3
            self.other_cpu_ms += max(other, 0.0)
            self.wall_ms += span
            self.calls += 1
            if other > self.worst[0]:
                self.worst = (other, span)

    def check(self, omp_wait_policy: str | None = None) -> dict[str, Any]:
        """The protocol Check ``reference_interference``. omp_wait_policy: the process's OMP_WAIT_POLICY; an
        active one (the user's choice: the pipeline sets passive otherwise) keeps torch's own OpenMP team
        spinning after every parallel region, whatever the candidate does — then the finding only warns."""
        share = self.other_cpu_ms / self.wall_ms if self.wall_ms > 0 else 0.0
        numbers = (f"{self.other_cpu_ms:.1f} ms of CPU on the candidate process's other threads during "
                   f"{self.wall_ms:.1f} ms of the reference's {self.calls} timed calls ({share:.0%})")
        if self.tampered:
            return {"name": "reference_interference", "outcome": "fail", "failVerdict": "cheating",
                    "evidence": f"{self.tampered}, seen while the reference was timed: only the candidate's "
                                f"process (its parent) could change that; {numbers}"}
        busy = self.calls and share > SHARE and self.other_cpu_ms > FLOOR_MS
        if busy and (omp_wait_policy or "passive").lower() != "passive":
            return {"name": "reference_interference", "outcome": "warn", "failVerdict": "cheating",
                    "evidence": f"{numbers}, with OMP_WAIT_POLICY={omp_wait_policy}: OpenMP's own spinning threads "
                                "may account for it, so it is not held against the candidate; the timing is "
                                "unreliable (set OMP_WAIT_POLICY=PASSIVE)"}
        if busy:
            return {"name": "reference_interference", "outcome": "fail", "failVerdict": "cheating",
                    "evidence": f"{numbers}: something in the candidate's process runs while only the reference "
                                "should (a thread spinning on the cores the reference is timed on, or work left "
                                "running after forward returned) — the speedup is not the kernels'"}
        return {"name": "reference_interference", "outcome": "pass", "failVerdict": "cheating",
                "evidence": f"{numbers}: the candidate's process is quiet while the reference is timed"}
