"""kforge verification checks: static scan, harness integrity, runtime anti-cheat and state semantics.

The worker pipeline (pipeline.py) calls these hooks with its EvalContext:

    before_import(ctx)   before the candidate is imported: static scan, harness snapshot, audit hook,
                         extension-call counting around load_inline
    after_import(ctx)    the import left the harness intact?
    run_checks(ctx)      the verify stage: every runtime check; returns protocol Check dicts, the
                         failures that decide the verdict first
    before_timing(ctx)   the process fingerprint right before the timed batch; returns failing Check dicts
    after_timing(ctx)    roofline floor and harness integrity after timing; returns Check dicts
    on_failure(ctx, verdict)  when correctness already failed: still run the checks, so a cheat that also
                         gets the numbers wrong is named as cheating rather than merely incorrect

`request.options.checks` selects runtime check groups (RUNTIME_CHECKS): empty (the protocol's default)
or "all" runs every group, names pick groups, "-name" drops one (e.g. "-ops" for an identity candidate
that validates timing by calling the very operator), "none" nothing at runtime. `request.strict` (--strict)
makes running the operator family the problem replaces `cheating`; by default it is disclosed (a warning). The static scan
and integrity checks always run. `standalone` runs the same checks around a
minimal loop for the corpus and tests.
"""

from __future__ import annotations

from typing import Any

from .result import CheckResult, verdict_from_checks
from .verifier import RUNTIME_CHECKS, Verifier

__all__ = ["CheckResult", "RUNTIME_CHECKS", "Verifier", "verdict_from_checks", "before_import", "after_import",
           "run_checks", "before_timing", "after_timing", "on_failure", "selected_checks", "close"]


def selected_checks(requested: list[str] | None) -> list[str]:
    names = list(requested or [])
    if "none" in names:
        return []
    dropped = {n[1:] for n in names if n.startswith("-")}
    picked = [n for n in names if not n.startswith("-") and n != "all"]
    chosen = list(RUNTIME_CHECKS) if "all" in names or not picked else [n for n in RUNTIME_CHECKS if n in picked]
    return [n for n in chosen if n not in dropped]


def _verifier(ctx: Any) -> Verifier:
    verifier = getattr(ctx, "kforge_verifier", None)
    if verifier is None:
        request = ctx.request
        verifier = Verifier(request.problem_path, request.candidate_path, ctx.device,
                            selected_checks(getattr(request, "checks", None)) or ["__none__"],
                            strict=bool(getattr(request, "strict", False)),
                            allow_tf32=bool(getattr(request, "allow_tf32", False)))
        ctx.kforge_verifier = verifier
    return verifier


def before_import(ctx: Any) -> None:
    _verifier(ctx).before_import(getattr(ctx, "problem", None), getattr(ctx, "candidate_source", None))


def after_import(ctx: Any) -> None:
    verifier = _verifier(ctx)
    if verifier.scan is None:
        verifier.before_import(getattr(ctx, "problem", None), getattr(ctx, "candidate_source", None))
    verifier.after_import()


def _ordered(verifier: Verifier) -> list[dict[str, Any]]:
    checks = verifier.results()
    rank = {"cheating": 0}
    return sorted(checks, key=lambda c: (c["outcome"] != "fail", rank.get(c["failVerdict"] or "", 1)))


def _oom_blame(ctx: Any, exc: BaseException) -> str | None:
    from .budget import is_out_of_memory, out_of_memory_not_the_candidates

    if not is_out_of_memory(exc):
        return None
    return out_of_memory_not_the_candidates(getattr(ctx, "forward_peaks", None))


def _run(ctx: Any, trials_passed: bool) -> Verifier:
    verifier = _verifier(ctx)
    if verifier.scan is None:  # hooks before import not wired: the static scan still runs
        verifier.before_import(None, getattr(ctx, "candidate_source", None))
    if ctx.ref_model is not None and ctx.new_model is not None and not getattr(ctx, "kforge_checks_ran", False):
        ctx.kforge_checks_ran = True
        if callable(getattr(ctx, "progress", None)):
            verifier.progress = lambda detail, fraction: ctx.progress("verify", detail, fraction)
        verifier.out_of_memory_blame = lambda exc: _oom_blame(ctx, exc)
        if verifier.rebuild is None and callable(getattr(ctx, "build_pair", None)):
            verifier.rebuild = ctx.build_pair
            verifier.init_inputs = list(getattr(ctx, "init_inputs", None) or [])
        if verifier.disguise is None and getattr(ctx, "candidate_source", None) is not None:
            from .disguised import Disguise

            request = ctx.request
            verifier.disguise = Disguise(request.problem_path, request.candidate_path, ctx.candidate_source,
                                         request.seed, list(getattr(ctx, "init_inputs", None) or []),
                                         getattr(ctx, "dtype", None), bool(getattr(request, "allow_tf32", False)))
        verifier.run_checks(ctx.ref_model, ctx.new_model, ctx.make_inputs, ctx.atol, ctx.rtol, trials_passed)
    return verifier


def run_checks(ctx: Any) -> list[dict[str, Any]]:
    return _ordered(_run(ctx, trials_passed=True))


def timed_variant(ctx: Any) -> dict[str, Any] | None:
    """The kind of inputs off the distribution input_distribution judged the candidate right on (off_distribution's
    spec), for the timing's rotation; None when none was."""
    verifier = getattr(ctx, "kforge_verifier", None)
    notes = verifier.context.notes if verifier is not None and verifier.context is not None else {}
    spec = notes.get("timed_variant_spec")
    return dict(spec) if isinstance(spec, dict) else None


def before_timing(ctx: Any) -> list[dict[str, Any]]:
    """The process fingerprint right before the timed batch."""
    verifier = _verifier(ctx)
    verifier.before_timing()
    return [c for c in _ordered(verifier) if c["name"] in ("harness_integrity", "runtime_audit", "thread_count")]


def after_timing(ctx: Any) -> list[dict[str, Any]]:
    verifier = _verifier(ctx)
    timing = ctx.result.get("timing") or {}
    median = (timing.get("cand") or {}).get("medianMs")
    gpu = (ctx.result.get("environment") or {}).get("gpu")
    before = {c["name"] for c in verifier.results()}
    verifier.after_timing(median, gpu, ctx.ref_model, ctx.make_inputs)
    if verifier.workload is not None:
        ctx.result["workload"] = verifier.workload.as_json()
    return [c for c in _ordered(verifier) if c["name"] not in before or c["name"] in (
        "roofline", "harness_integrity", "runtime_audit", "thread_count")]


def seal(ctx: Any) -> None:
    """The verdict is decided: what the candidate replaced is put back before the result is serialised."""
    verifier = getattr(ctx, "kforge_verifier", None)
    if verifier is not None and verifier.snapshot is not None:
        verifier.snapshot.restore()


def close(ctx: Any) -> None:
    verifier = getattr(ctx, "kforge_verifier", None)
    if verifier is not None:
        verifier.close()


def on_failure(ctx: Any, verdict: str) -> tuple[list[dict[str, Any]], tuple[str, str] | None]:
    """Checks after a failed stage; returns (checks, (verdict, reason) when cheating was found).

    After a failed correctness stage the runtime checks still run. After any other failure once the candidate
    was imported (it broke the problem's own code, raised while built, ...), what was recorded up to then —
    the static scan, the process fingerprint after the import, the threads it started — still decides: a
    candidate that tampers and then crashes is cheating, not merely a runtime error."""
    verifier = getattr(ctx, "kforge_verifier", None)
    if verdict not in ("incorrect", "shape_mismatch"):
        if verifier is None or verifier.scan is None:
            return [], None
        # What the audit hook recorded (or refused) since the last stage: a refused walk is what made it fail.
        verifier.after_failed_stage(verdict)
    else:
        verifier = _run(ctx, trials_passed=False)
    verifier.close()
    found, check = verifier.verdict()
    checks = _ordered(verifier)
    if found == "cheating" and check is not None:
        return checks, ("cheating", f"{check.name}: {check.evidence}")
    return checks, None
