"""EvalRequest parsing: the CLI's JSON (protocol.ts) turned into typed, validated dataclasses.

The TS side validates with zod before sending; we check again so a hand-written request (see README)
fails with a one-line message naming the bad field instead of a KeyError deep in the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import PROTOCOL_VERSION

PRECISIONS = ("fp32", "fp16", "bf16")
DEVICES = ("cuda", "cpu")


class RequestError(ValueError):
    """The request does not follow protocol.ts; the message names the field."""


@dataclass(frozen=True)
class TimingOptions:
    enabled: bool
    warmup_iters: int
    min_iters: int
    max_iters: int
    budget_seconds: float
    target_relative_ci: float


@dataclass(frozen=True)
class EvalRequest:
    problem_path: str
    problem_name: str
    atol: float | None
    rtol: float | None
    candidate_path: str
    candidate_label: str
    origin: dict[str, Any]
    trials: int
    seed: int
    precision: str | None
    allow_tf32: bool
    device: str
    timing: TimingOptions
    cache_dir: str
    checks: list[str]
    strict: bool = False
    # None: the default for the device (reference_in_own_process)
    reference_process: bool | None = None
    # Started ahead of the candidate file: the candidate is read only after a "go" line on stdin (await_go).
    wait_for_go: bool = False
    # The CLI's socket for the judge's records (judge.py): handed to the reference process, closed here before the
    # candidate is imported. None: no judge channel (hand-written requests, callers without one).
    judge_fd: int | None = None
    # The candidate's code as the CLI read it when the suite was set up (request.candidate.source): judged instead of
    # what the file holds when this worker starts — an earlier candidate of the suite could have rewritten it.
    # None: the file is read (hand-written requests).
    candidate_source: str | None = None
    # What the suite knows of the extension cache (request.extensionCache; extension_cache.py): {"since": ms,
    # "libraries": {relative path: sha256} | None}. None: the cache is used as found (hand-written requests, Ray tasks).
    extension_cache: dict[str, Any] | None = None

    @property
    def reference_in_own_process(self) -> bool:
        """Absent in the request: on (CPU and CUDA)."""
        return True if self.reference_process is None else self.reference_process


def _get(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise RequestError(f"{where}: expected an object")
    if key not in obj:
        raise RequestError(f"{where}.{key}: missing")
    return obj[key]


def _str(obj: Any, key: str, where: str) -> str:
    value = _get(obj, key, where)
    if not isinstance(value, str):
        raise RequestError(f"{where}.{key}: expected a string")
    return value


def _int(obj: Any, key: str, where: str, minimum: int) -> int:
    value = _get(obj, key, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise RequestError(f"{where}.{key}: expected an integer >= {minimum}")
    return value


def _positive(obj: Any, key: str, where: str, nullable: bool = False) -> float | None:
    value = _get(obj, key, where)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise RequestError(f"{where}.{key}: expected a positive number{' or null' if nullable else ''}")
    return float(value)


def _choice(obj: Any, key: str, where: str, choices: tuple[str, ...], nullable: bool = False) -> str | None:
    value = _get(obj, key, where)
    if value is None and nullable:
        return None
    if value not in choices:
        raise RequestError(f"{where}.{key}: expected one of {', '.join(choices)}")
    return value


def _origin(obj: Any, where: str) -> dict[str, Any]:
    origin = _get(obj, "origin", where)
    w = f"{where}.origin"
    _choice(origin, "kind", w, ("file", "transcript"))
    _str(origin, "sourcePath", w)
    for key in ("blockIndex", "blockCount"):
        value = _get(origin, key, w)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise RequestError(f"{w}.{key}: expected a non-negative integer or null")
    note = _get(origin, "note", w)
    if note is not None and not isinstance(note, str):
        raise RequestError(f"{w}.note: expected a string or null")
    return {k: origin[k] for k in ("kind", "sourcePath", "blockIndex", "blockCount", "note")}


def _optional_flag(options: Any, key: str) -> bool:
    """An optional boolean option (absent in hand-written and older requests means off)."""
    value = options.get(key, False) if isinstance(options, dict) else False
    if not isinstance(value, bool):
        raise RequestError(f"request.options.{key}: expected a boolean")
    return value


def parse_extension_cache(value: Any, where: str = "request.extensionCache") -> dict[str, Any]:
    """{"since": ms since the epoch, "libraries": {relative path: sha256 hex} | None}, checked."""
    since = _get(value, "since", where)
    if isinstance(since, bool) or not isinstance(since, (int, float)) or since < 0:
        raise RequestError(f"{where}.since: expected a non-negative number")
    libraries = value.get("libraries")
    strings = isinstance(libraries, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in libraries.items())
    if libraries is not None and not strings:
        raise RequestError(f"{where}.libraries: expected an object of strings or null")
    return {"since": float(since), "libraries": libraries}


def parse_request(data: Any) -> EvalRequest:
    """Validates a decoded EvalRequest and returns it typed; raises RequestError naming the field."""
    protocol = _get(data, "protocol", "request")
    if protocol != PROTOCOL_VERSION:
        raise RequestError(f"request.protocol: worker speaks protocol {PROTOCOL_VERSION}, got {protocol!r}")
    problem = _get(data, "problem", "request")
    candidate = _get(data, "candidate", "request")
    options = _get(data, "options", "request")
    timing = _get(options, "timing", "request.options")
    tw = "request.options.timing"
    if not isinstance(_get(timing, "enabled", tw), bool):
        raise RequestError(f"{tw}.enabled: expected a boolean")
    checks = _get(options, "checks", "request.options")
    if not isinstance(checks, list) or not all(isinstance(c, str) for c in checks):
        raise RequestError("request.options.checks: expected an array of strings")
    return EvalRequest(
        problem_path=_str(problem, "path", "request.problem"),
        problem_name=_str(problem, "name", "request.problem"),
        atol=_positive(problem, "atol", "request.problem", nullable=True),
        rtol=_positive(problem, "rtol", "request.problem", nullable=True),
        candidate_path=_str(candidate, "path", "request.candidate"),
        candidate_label=_str(candidate, "label", "request.candidate"),
        origin=_origin(candidate, "request.candidate"),
        trials=_int(options, "trials", "request.options", 1),
        seed=_int(options, "seed", "request.options", 0),
        precision=_choice(options, "precision", "request.options", PRECISIONS, nullable=True),
        allow_tf32=_optional_flag(options, "allowTf32"),
        device=_choice(options, "device", "request.options", DEVICES),  # type: ignore[arg-type]
        timing=TimingOptions(
            enabled=timing["enabled"],
            warmup_iters=_int(timing, "warmupIters", tw, 0),
            min_iters=_int(timing, "minIters", tw, 1),
            max_iters=_int(timing, "maxIters", tw, 1),
            budget_seconds=_positive(timing, "budgetSeconds", tw),  # type: ignore[arg-type]
            target_relative_ci=_positive(timing, "targetRelativeCi", tw),  # type: ignore[arg-type]
        ),
        cache_dir=_str(options, "cacheDir", "request.options"),
        checks=list(checks),
        strict=_optional_flag(options, "strict"),
        reference_process=_optional_flag(options, "referenceProcess") if "referenceProcess" in options else None,
        wait_for_go=_optional_flag(options, "waitForGo"),
        judge_fd=_int(options, "judgeFd", "request.options", 0) if options.get("judgeFd") is not None else None,
        candidate_source=_str(candidate, "source", "request.candidate") if candidate.get("source") is not None else None,
        extension_cache=(
            parse_extension_cache(data["extensionCache"]) if data.get("extensionCache") is not None else None
        ),
    )
