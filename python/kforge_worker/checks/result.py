"""The one record every verification check produces, matching `Check` in src/worker/protocol.ts.

A check names what it looked at, says pass/fail/warn/skip, names the verdict a failure implies, and carries
evidence a person can act on (file:line for static findings, numbers for runtime ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal

Outcome = Literal["pass", "fail", "warn", "skip"]

# Verdict precedence when several checks fail: deliberate circumvention outranks a wrong answer.
_VERDICT_RANK = {"cheating": 0, "runtime_error": 1, "shape_mismatch": 2, "incorrect": 3}


@dataclass
class CheckResult:
    name: str
    outcome: Outcome
    fail_verdict: str | None
    evidence: str
    seconds: float | None = None  # wall time of the check group that produced it
    peak_host_bytes: int | None = None  # the most host memory the worker held while that group ran (peaks.py)
    peak_device_bytes: int | None = None  # ... and device memory (the CUDA allocator's reserved peak)
    start_host_bytes: int | None = None  # the worker's resident set when that group started

    def to_json(self) -> dict:
        found = {
            "name": self.name,
            "outcome": self.outcome,
            "failVerdict": self.fail_verdict,
            "evidence": self.evidence,
        }
        if self.seconds is not None:
            found["seconds"] = self.seconds
        if self.peak_host_bytes is not None:
            found["peakHostBytes"] = self.peak_host_bytes
        if self.peak_device_bytes is not None:
            found["peakDeviceBytes"] = self.peak_device_bytes
        if self.start_host_bytes is not None:
            found["startHostBytes"] = self.start_host_bytes
        return found


def passed(name: str, evidence: str, fail_verdict: str | None = None) -> CheckResult:
    return CheckResult(name, "pass", fail_verdict, evidence)


def failed(name: str, evidence: str, fail_verdict: str = "cheating") -> CheckResult:
    return CheckResult(name, "fail", fail_verdict, evidence)


def warned(name: str, evidence: str, fail_verdict: str | None = None) -> CheckResult:
    return CheckResult(name, "warn", fail_verdict, evidence)


def skipped(name: str, evidence: str, fail_verdict: str | None = None) -> CheckResult:
    return CheckResult(name, "skip", fail_verdict, evidence)


def verdict_from_checks(checks: Iterable[CheckResult]) -> tuple[str | None, CheckResult | None]:
    """The verdict the failing checks imply (None when none failed) and the check that decided it."""
    worst: CheckResult | None = None
    for check in checks:
        if check.outcome != "fail" or check.fail_verdict is None:
            continue
        if worst is None or _VERDICT_RANK.get(check.fail_verdict, 9) < _VERDICT_RANK.get(
            worst.fail_verdict or "", 9
        ):
            worst = check
    return (worst.fail_verdict if worst else None), worst
