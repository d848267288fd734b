"""The harness itself after the candidate ran: integrity snapshot, audit events, threads."""

from __future__ import annotations

import sys

import torch

from .context import compare, VerifyContext
from .integrity import ThreadCount
from .result import CheckResult, failed, passed


def check_integrity(ctx: VerifyContext, stage: str, thorough: bool = True) -> list[CheckResult]:
    results = []
    if ctx.snapshot is not None:
        changes = ctx.snapshot.diff(thorough)
        if changes:
            results.append(failed("harness_integrity", f"after {stage}: " + "; ".join(changes[:6])
                                  + (f" (+{len(changes) - 6} more)" if len(changes) > 6 else "")))
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
            results.append(failed("thread_count", f"Python threads {ctx.threads_before.python} -> {now.python} after "
                                  f"{stage} ({', '.join(extra) or 'unnamed'}): work continues in the background"))
        else:
            results.append(passed("thread_count", f"no Python threads left running after {stage} "
                                  f"(native threads {ctx.threads_before.native} -> {now.native})"))
    return results
