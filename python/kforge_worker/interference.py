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
import sys
import time
from collections.abc import Callable
from typing import Any

_process_time = time.process_time
_thread_time = time.thread_time
_perf_counter = time.perf_counter


def _children_seconds() -> float:
    """CPU time of this process's children that have ended and been reaped (RUSAGE_CHILDREN, microseconds): a
    process the candidate starts, runs while the reference is timed and reaps at once (from a native thread) is
    neither a live child at any check nor part of this process's own CPU time — only here. The reference process
    is reaped only at the end, so none of its time is in it."""
    try:
        usage = _getrusage(_RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime
    except (OSError, NameError):
        return 0.0


try:
    import resource as _resource

    _getrusage, _RUSAGE_CHILDREN = _resource.getrusage, _resource.RUSAGE_CHILDREN
except ImportError:  # not POSIX
    pass

# Other threads may use this share of the reference's wall time (an idle pool's wake-ups, a driver's thread)
SHARE = 0.2
# ... and this much in total over the whole timing, whatever the share (a few ms of housekeeping).
FLOOR_MS = 20.0
# The calling thread itself only writes the request and reads the reply: beyond this much CPU in one call, what it
# ran is not the harness's (a signal handler runs on it, between the harness's bytecodes, while it waits).
OWN_ALLOWANCE_MS = 0.5


Scheduling = tuple  # (CPU affinity, niceness, scheduling policy) of one thread; older baselines have two fields
_POLICIES = {getattr(os, n, -1): n for n in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE", "SCHED_FIFO", "SCHED_RR")}


def _policy(tid: int) -> int:
    try:
        return os.sched_getscheduler(tid)
    except (OSError, AttributeError):
        return -1


def scheduling(pid: int) -> dict[int, Scheduling]:
    """thread id -> (CPU affinity, niceness, policy) for every thread of process `pid` (empty where /proc is
    absent). The policy matters as much as niceness: SCHED_IDLE (which any user may set on their own processes)
    keeps the niceness and the cores and runs the thread only when nothing else wants the core."""
    out: dict[int, Scheduling] = {}
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return out
    for tid in tids:
        try:
            out[tid] = (frozenset(os.sched_getaffinity(tid)), os.getpriority(os.PRIO_PROCESS, tid), _policy(tid))
        except OSError:  # the thread has just ended
            continue
    return out


def cgroup(pid: int) -> str | None:
    """The control groups process `pid` belongs to (/proc/<pid>/cgroup), or None where unreadable: moved into
    another group (a CPU quota, a frozen group) the reference is throttled from outside."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return f.read()
    except OSError:
        return None


def scheduling_change(baseline: Scheduling | None, now: dict[int, Scheduling]) -> str | None:
    """How the reference process's threads are scheduled now differs from how its main thread was when it
    was started (before the candidate existed), or None. Threads may be bound to single cores (an OpenMP
    binding), so the rule is on the union of their cores and on every thread's niceness: pinning the process
    to fewer cores, or lowering its priority, slows the reference from outside it."""
    if baseline is None or not now:
        return None
    cores, nice = baseline[0], baseline[1]
    union = frozenset().union(*(s[0] for s in now.values()))
    if union != cores and not _openmp_binds():
        return (f"the reference process's threads may run on cores {sorted(union)}, not {sorted(cores)} as when it "
                "started")
    reniced = sorted(tid for tid, s in now.items() if s[1] != nice)
    if reniced:
        return f"{len(reniced)} of the reference process's threads were reniced (niceness {nice} when it started)"
    policy = baseline[2] if len(baseline) > 2 else None
    if policy is not None and policy >= 0:
        moved = sorted(tid for tid, s in now.items() if len(s) > 2 and s[2] >= 0 and s[2] != policy)
        if moved:
            names = sorted({_POLICIES.get(now[t][2], str(now[t][2])) for t in moved})
            return (f"{len(moved)} of the reference process's threads were moved to scheduling policy "
                    f"{', '.join(names)} ({_POLICIES.get(policy, policy)} when it started)")
    return None


def cgroup_change(baseline: str | None, pid: int) -> str | None:
    """The reference process moved to other control groups since it started, or None."""
    if baseline is None:
        return None
    now = cgroup(pid)
    if now is not None and now != baseline:
        return "the reference process was moved to another control group (/proc/<pid>/cgroup changed)"
    return None


_PR_SET_CHILD_SUBREAPER, _PR_GET_CHILD_SUBREAPER = 36, 37


def _prctl() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def adopt_orphans() -> bool:
    """Makes this process (the worker) its descendants' subreaper, before the candidate is imported: a process the
    candidate starts and detaches (fork, setsid, fork again) is then re-parented here instead of to init, so it
    stays one of this process's children and foreign_children() sees it. False where Linux's prctl is missing."""
    try:
        return _prctl()(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 — not Linux, no libc: the rule then covers direct children only
        return False


def adopting() -> bool | None:
    """Whether this process is still a child subreaper (None: cannot tell)."""
    try:
        import ctypes

        flag = ctypes.c_int(0)
        if _prctl()(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return None
        return bool(flag.value)
    except Exception:  # noqa: BLE001
        return None


def foreign_children(allowed: set[int], pid: int | None = None, zombies: bool = False) -> list[int]:
    """This process's live children (every thread's, /proc/<pid>/task/<tid>/children) other than `allowed` (the
    reference process); zombies (ended, not yet reaped) only when `zombies`."""
    pid = os.getpid() if pid is None else pid
    found: set[int] = set()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.update(int(c) for c in f.read().split())
        except (OSError, ValueError):
            continue
    out = []
    for child in sorted(found - allowed):
        try:
            with open(f"/proc/{child}/stat") as f:
                stat = f.read()
            if stat[stat.rfind(")") + 2:].split()[0] in ("Z", "X") and not zombies:
                continue
        except (OSError, IndexError):
            continue
        out.append(child)
    return out


def end_descendants(allowed: set[int], rounds: int = 5) -> list[int]:
    """Kills this process's live children outside `allowed` (those that were there before the run, the reference
    process), a few rounds over (a killed process's own children are re-parented here when this process is their
    subreaper), and reaps them: nothing the candidate started outlives its evaluation — a detached helper left
    behind could otherwise serve the next candidate's process from outside it. Returns the pids killed."""
    import signal

    killed: list[int] = []
    for _ in range(rounds):
        others = foreign_children(allowed)
        if not others:
            break
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                continue
        time.sleep(0.02)
        for pid in others:
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                continue
    return killed


def children_change(allowed: set[int], adopt: bool) -> str | None:
    """A process the candidate's process started (and left running) while the reference is timed: its CPU time
    is another process's, so the idle meter, which reads this process's own, cannot see it take the reference's
    cores. Also a subreaper switch turned off (orphans would escape to init)."""
    others = foreign_children(allowed, zombies=True)
    if others:
        return (f"the candidate's process has {len(others)} other process(es) running or just ended (pid "
                f"{', '.join(map(str, others[:4]))}) while the reference is timed: work outside this process, "
                "which its CPU time does not show")
    if adopt and adopting() is False:
        return "the worker's child-subreaper setting was turned off (a detached process would escape to init)"
    return None


def _openmp_binds() -> bool:
    """An OpenMP thread binding asked for in the environment (the child inherits it) pins the reference's own
    threads, the main one included, to as many cores as its team has: the affinity rule cannot tell that from
    a pin, so only niceness is compared then."""
    return any(os.environ.get(k, "").strip().lower() not in ("", "false") for k in
               ("OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY"))


def hook_state(tools: bool = True) -> tuple[tuple[str, int], ...]:
    """What makes the interpreter run code later on the harness's own thread, by identity: Python's signal handlers
    and armed interval timers, the trace and profile functions (this thread's and threading's for new threads), the
    collector's callbacks, sys.monitoring's tools (``tools``: not compared in the checks, where a first call of
    torch.compile may register one), torch's function and dispatch mode stacks. Installed by candidate code and
    still in place when its call returns, such code runs in the timing loop outside every timed region (a profile
    function sees the harness's own calls, frames included: it can do the next call's work as the fresh inputs are
    handed over), or while the reference is timed."""
    # The trace and profile functions first, before any Python-level call here: such a function sees every call the
    # harness makes (this one's included) and could take itself away once it sees the comparison coming.
    state = [("a trace function (sys.settrace)", id(sys.gettrace())),
             ("a profile function (sys.setprofile)", id(sys.getprofile()))]
    import gc
    import signal
    import threading

    for signum in sorted(signal.valid_signals()):
        try:
            state.append((f"a handler for {signal.Signals(signum).name}", id(signal.getsignal(signum))))
        except (OSError, ValueError):
            continue
    for i, which in enumerate((signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF)):
        state.append((f"interval timer {i} armed", int(signal.getitimer(which)[0] > 0)))
    state += [("a trace function for new threads", id(getattr(threading, "_trace_hook", None))),
              ("a profile function for new threads", id(getattr(threading, "_profile_hook", None))),
              ("a garbage-collector callback", hash(tuple(id(c) for c in gc.callbacks)))]
    monitoring = getattr(sys, "monitoring", None)  # 3.12: tools whose callbacks see every call, like a profiler
    if monitoring is not None and tools:
        state += [(f"a sys.monitoring tool ({tool})", hash((monitoring.get_tool(tool), monitoring.get_events(tool))))
                  for tool in range(6)]
    torch = sys.modules.get("torch")
    if torch is not None:  # a mode left on the stack runs on every torch call the harness makes (refilling inputs)
        state.append(("a torch function mode", torch._C._len_torch_function_stack()))
        try:
            from torch.utils._python_dispatch import _len_torch_dispatch_stack

            state.append(("a torch dispatch mode", _len_torch_dispatch_stack()))
        except ImportError:
            pass
    return tuple(state)


def hook_change(baseline: tuple[tuple[str, int], ...]) -> str | None:
    """What changed in hook_state() since `baseline`, in words ("left ... behind: ..."); None when nothing did."""
    now = dict(hook_state())
    changed = [what for what, then in baseline if now.get(what) != then]
    if not changed:
        return None
    return (f"left {', '.join(changed[:4])} behind: code of its own set to run on the harness's thread after forward "
            "returned")


class IdleMeter:
    def __init__(self) -> None:
        self.tampered: str | None = None  # the reference process's scheduling changed (scheduling_change)
        self.other_cpu_ms = 0.0
        self.wall_ms = 0.0
        self.calls = 0
        self.worst: tuple[float, float] = (0.0, 0.0)  # (other threads' CPU ms, wall ms) of the worst call
        self.own_excess_ms = 0.0  # the calling thread's CPU beyond OWN_ALLOWANCE_MS per call
        self.deferred: str | None = None  # code a timed candidate call left set to run later (hook_change)

    def measure(self, call: Callable[[], Any]) -> Any:
        """Runs `call` (a reference call the worker only waits for) and books the CPU time this process spends
        meanwhile: its other threads' (and reaped children's), and the calling thread's own beyond what writing the
        request and reading the reply take (Python signal handlers run on it while it waits: a SIGALRM armed by the
        candidate's forward spins there while the reference is timed, no thread started)."""
        proc, own, wall, ended = _process_time(), _thread_time(), _perf_counter(), _children_seconds()
        try:
            return call()
        finally:
            mine = (_thread_time() - own) * 1e3
            other = ((_process_time() - proc) * 1e3 - mine + (_children_seconds() - ended) * 1e3)
            excess = max(mine - OWN_ALLOWANCE_MS, 0.0)
            self.own_excess_ms += excess
            other = max(other, 0.0) + excess
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
        numbers = (f"{self.other_cpu_ms:.1f} ms of CPU on the candidate process's other threads (and processes it "
                   f"reaped; {self.own_excess_ms:.1f} ms of it on the waiting thread itself, beyond "
                   f"{OWN_ALLOWANCE_MS:g} ms a call) during "
                   f"{self.wall_ms:.1f} ms of the reference's {self.calls} timed calls ({share:.0%})")
        if self.deferred:
            return {"name": "reference_interference", "outcome": "fail", "failVerdict": "cheating",
                    "evidence": f"{self.deferred}; {numbers}"}
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
