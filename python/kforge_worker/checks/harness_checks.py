"""The harness itself after the candidate ran: integrity snapshot, audit events, threads."""

from __future__ import annotations

import sys
import threading
import time

import torch

from .context import clone_inputs, compare, preserved_state, run, sync, VerifyContext
from .integrity import ThreadCount
from .result import CheckResult, failed, passed, warned


def check_integrity(ctx: VerifyContext, stage: str, thorough: bool = True, probe: bool = False) -> list[CheckResult]:
    """probe: the models exist (not at import): new Python threads are then judged by what they do after a
    forward returns (`_work_after_return`), not by existing."""
    results = []
    if ctx.snapshot is not None:
        changes = ctx.snapshot.diff(thorough)
        disclosed = list(ctx.snapshot.disclosed)
        if changes:
            results.append(failed("harness_integrity", f"after {stage}: " + "; ".join(changes[:6])
                                  + (f" (+{len(changes) - 6} more)" if len(changes) > 6 else "")))
        elif disclosed:
            results.append(warned("harness_integrity", f"after {stage}: disclosed: {'; '.join(disclosed)} (a speed "
                                  "switch of this process only: the reference is timed in its own); functions, "
                                  "sys.modules and precision flags otherwise unchanged"))
        else:
            results.append(passed("harness_integrity", f"after {stage}: torch/timer/compare functions, sys.modules "
                                  f"and precision flags unchanged ({len(ctx.snapshot.functions)} functions watched)"))
    if ctx.audit is not None:
        events = ctx.audit.events
        if events:
            shown = "; ".join(e.render() for e in events[:5])
            results.append(failed("runtime_audit", f"{len(events)} sensitive event(s) from the candidate's code: {shown}"))
        else:
            results.append(passed("runtime_audit", "no process spawns, frame/gc walks, ctypes loads, class patches "
                                  "or /proc reads from the candidate's code"))
    if ctx.threads_before is not None:
        now = ThreadCount.now()
        if now.python > ctx.threads_before.python:
            extra = sorted(set(now.names) - set(ctx.threads_before.names))
            shown = ", ".join(extra) or "unnamed"
            busy = _work_after_return(ctx, ctx.threads_before.idents) if probe else None
            if busy is None or busy[0]:
                why = (f"{', '.join(_usage(n, ms) for n, ms in busy[0].items())} in the {SETTLE_S * 1e3:.0f} ms "
                       "after forward returned" if busy else "work continues in the background")
                results.append(failed("thread_count", f"Python threads {ctx.threads_before.python} -> {now.python} "
                                      f"after {stage} ({shown}): {why}"))
            else:
                results.append(passed("thread_count", f"Python threads {ctx.threads_before.python} -> {now.python} "
                                      f"after {stage} ({shown}), parked: {busy[1]:.3f} ms of CPU between them in the "
                                      f"{SETTLE_S * 1e3:.0f} ms after a forward returned (a pool kept for the next "
                                      "call, idle while nothing of the candidate's runs)"))
        else:
            results.append(passed("thread_count", f"no Python threads left running after {stage} "
                                  f"(native threads {ctx.threads_before.native} -> {now.native})"))
    return results


# A thread the candidate keeps (a lazily made pool) may use this much CPU after forward returned: a worker
# finishing its loop back to its queue's wait. Work on the outputs, or anything else, takes more.
SETTLE_S = 0.05
PARKED_MS = 0.5
_cpu_clock = getattr(time, "pthread_getcpuclockid", None)
_clock_gettime = time.clock_gettime
_sleep = time.sleep
_enumerate = threading.enumerate


def _usage(name: str, ms: float) -> str:
    return f"{name} ended" if ms == float("inf") else f"{name} used {ms:.2f} ms of CPU"


def _thread_cpu_ms(before: frozenset[int]) -> dict[str, float] | None:
    """CPU time (ms) of every Python thread whose ident is not in `before`, by name#ident; None where
    unmeasurable."""
    if _cpu_clock is None:
        return None
    out: dict[str, float] = {}
    for t in _enumerate():
        if t.ident in before or t.ident is None:
            continue
        try:
            out[f"{t.name}#{t.ident}"] = _clock_gettime(_cpu_clock(t.ident)) * 1e3
        except (OSError, OverflowError):  # the thread has just ended
            continue
    return out


def _work_after_return(ctx: VerifyContext, before: frozenset[int]) -> tuple[dict[str, float], float] | None:
    """A Python thread the candidate left behind is judged by its CPU time: one forward on fresh inputs, then the
    new threads' CPU clocks at the return and SETTLE_S later. ({thread: ms} of those above PARKED_MS, the total),
    or None when the threads' clocks cannot be read. A pool kept for the next call is parked on its queue then;
    a helper that finishes the outputs, or does anything else, after the return is not. What a thread does while
    the reference is timed is the idle meter's (reference_interference)."""
    try:
        inputs = clone_inputs(ctx.make_inputs(ctx.seed()))
        with preserved_state(ctx.cand):  # a probe, not a call the state checks should see
            out = run(ctx.cand, inputs)
            sync(ctx.device)
    except Exception:  # noqa: BLE001 — the candidate's failure is other checks' to report
        return None
    start = _thread_cpu_ms(before)
    _sleep(SETTLE_S)
    after = _thread_cpu_ms(before)
    del out
    if start is None or after is None:
        return None
    used = {name: after[name] - start.get(name, 0.0) for name in after}
    busy = {n.split("#")[0]: ms for n, ms in used.items() if ms > PARKED_MS}
    # alive when forward returned, gone SETTLE_S later: it ran after the return (a kept pool does not end)
    busy.update({n.split("#")[0]: float("inf") for n in start if n not in after})
    return busy, sum(used.values())
