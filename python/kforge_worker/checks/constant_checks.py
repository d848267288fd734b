"""The problem's constants varied: a ModelNew must honour the values it is given, not the benchmark's.

Every other check builds the pair from `get_init_inputs()` and calls it with what `get_inputs()` draws, so a float
the problem fixes there — a scale and a shift handed to the constructor, a Python float handed to forward — is the
same number in every call the harness makes. A candidate that bakes it into its kernel (ignores the constructor's
argument, or forward's) is right on every one of them and wrong for any model built or called with another value
(red team round 13, adv_init_scale_baked and adv_scalar_input_baked). KernelBench's reading of a ModelNew is "the
same interface as Model": its arguments are arguments.

* `init_constants`: Model and ModelNew rebuilt (`VerifyContext.rebuild`, the pipeline's own way: the same seed,
  placed, the reference's state_dict loaded where the names match) with every non-integral float among
  get_init_inputs() — nested in lists and tuples too — scaled by a secret factor in [0.5, 0.8] or [1.2, 1.5] (the
  same sign; ints, bools and strings untouched: ints usually set shapes), then called on fresh inputs and compared by
  the pass mark (a miss judged against float64 as every other check's: `judged_compare`, on the rebuilt reference).
* `scalar_inputs`: the pair the harness checks called with every Python float among get_inputs()' values (not
  tensors; nested in lists and tuples too) scaled the same way.

Only where the reference itself takes the varied values: it constructs (with state of the same names and shapes as
the benchmark's — a float that sizes a layer is no constant), runs, is finite wherever it is on the benchmark's
values, and gives outputs of the same shapes and dtypes; otherwise a second set of factors, all below 1 (a
probability, a momentum, a slope near its bound), and then a skip with the reference's reason. A candidate that
raises on the other values is said (a warning: specialised, but not wrong — extra_shapes' rule), one that answers
wrongly is `incorrect`, naming the argument and both values. Cost: one more build of each model and two calls
(`init_constants`), three calls (`scalar_inputs`); a rejected first set costs the reference's share once more."""

from __future__ import annotations

import dataclasses
import inspect
import math
import random
from collections.abc import Callable
from typing import Any

import torch

from .context import ReferenceRejected, VerifyContext, clone_inputs, preserved_state, run, sync, tensors
from .judge import judged_compare
from .result import CheckResult, failed, passed, skipped, warned

Path = tuple[int, ...]
# The factor ranges: far enough from 1 that a baked constant misses by much more than any tolerance (a 20% change
# of a scale is 20% of the output), near enough that the value stays plausible for its role.
_SPREAD = ((0.5, 0.8), (1.2, 1.5))
_SHRINK = ((0.5, 0.8),)


def _is_constant(value: Any, integral_too: bool) -> bool:
    """A Python float (numpy's float64 too: a float subclass), finite, non-zero; non-integral unless `integral_too`."""
    if not isinstance(value, float) or isinstance(value, bool) or not math.isfinite(value) or value == 0.0:
        return False
    return integral_too or value != math.floor(value)


def float_paths(values: Any, integral_too: bool = False, _at: Path = ()) -> list[Path]:
    """Where the floats to vary are among `values` (a list, tuples and lists inside it followed)."""
    if isinstance(values, (list, tuple)):
        out: list[Path] = []
        for k, v in enumerate(values):
            out.extend(float_paths(v, integral_too, (*_at, k)))
        return out
    return [_at] if _at and _is_constant(values, integral_too) else []


def _get(values: Any, path: Path) -> Any:
    for k in path:
        values = values[k]
    return values


def _replaced(values: Any, path: Path, new: Any) -> Any:
    if not path:
        return new
    items = list(values)
    items[path[0]] = _replaced(items[path[0]], path[1:], new)
    if isinstance(values, tuple):
        return type(values)(*items) if hasattr(values, "_fields") else type(values)(items)
    return items if type(values) is list else type(values)(items)


def varied(values: list[Any], paths: list[Path], rng: random.Random,
           ranges: tuple[tuple[float, float], ...] = _SPREAD) -> tuple[list[Any], dict[Path, tuple[float, float]]]:
    """`values` with the float at each path scaled by its own factor drawn from `ranges` (the same sign, never 1);
    returns the new list and path -> (old, new)."""
    out: Any = list(values)
    changes: dict[Path, tuple[float, float]] = {}
    for path in paths:
        old = _get(values, path)
        lo, hi = rng.choice(ranges)
        new = type(old)(old * rng.uniform(lo, hi))
        out = _replaced(out, path, new)
        changes[path] = (float(old), float(new))
    return out, changes


def _names(fn: Any, skip_self: bool) -> list[str]:
    """The positional parameter names of `fn` (an __init__ or a forward), for naming what was varied."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    if skip_self and params and params[0].name == "self":
        params = params[1:]
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def describe(changes: dict[Path, tuple[float, float]], names: list[str], what: str) -> str:
    parts = []
    for path, (old, new) in changes.items():
        head = path[0]
        label = f"{what} {head}" + (f" ({names[head]})" if head < len(names) else "")
        label += "".join(f"[{k}]" for k in path[1:])
        parts.append(f"{label} {old:.6g} -> {new:.6g}")
    return ", ".join(parts)


def _shapes(out: Any) -> list[tuple[tuple[int, ...], torch.dtype]]:
    return [(tuple(t.shape), t.dtype) for t in tensors(out)]


def _newly_non_finite(out: Any, base: Any) -> bool:
    """Whether `out` has a non-finite float where `base` (the same problem on its own values) is finite."""
    for o, b in zip(tensors(out), tensors(base)):
        if o.is_floating_point() and o.shape == b.shape:
            if bool((~torch.isfinite(o) & torch.isfinite(b.to(o.device))).any()):
                return True
    return False


def _rejects(out: Any, base: Any) -> str | None:
    """Why the reference's output on the varied values says they are not valid ones (None: it takes them)."""
    if _shapes(out) != _shapes(base):
        return f"its outputs change shape or dtype ({_shapes(base)} -> {_shapes(out)})"
    if _newly_non_finite(out, base):
        return "its outputs are not finite where they are on the benchmark's values"
    return None


def _tight_atol(ctx: VerifyContext) -> float:
    """The tightened atol when the problem's own would pass a trivial output (tolerance_sanity), as extra_shapes."""
    return min(ctx.atol, ctx.notes.get("tight_atol", ctx.atol))


# ---------------------------------------------------------------------------------------- one shape, two channels
class _Refused(Exception):
    """The reference does not take these values (the message says why)."""


class _CandidateRaised(Exception):
    """The candidate raised on values the reference takes: `where` is "" (its constructor) or " in forward"."""

    def __init__(self, where: str, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}{where}: {str(exc)[:200]}")


@dataclasses.dataclass
class _Channel:
    """One way a model is handed constants: the check's name and words, the benchmark's values, and how to get the
    reference's output for other values (`reference`: values -> (output, state), raising _Refused or
    _CandidateRaised) and then the candidate's (`candidate`: (state, values) -> (output, the context that judges
    it, the inputs both were called on), raising _CandidateRaised)."""

    check: str
    what: str  # "argument" / "input": how describe() names a varied value
    verb: str  # "built" / "called"
    values: list[Any]
    names: list[str]
    reference: Callable[[list[Any]], tuple[Any, Any]]
    candidate: Callable[[Any, list[Any]], tuple[Any, VerifyContext, list[Any]]]
    missed: str  # what a miss means, after the numbers


def _vary(ctx: VerifyContext, ch: _Channel, paths: list[Path], base: Any) -> CheckResult:
    """The channel's floats varied (a second, shrinking set when the reference refuses the first); a miss is
    `incorrect`, with which values alone the candidate misses on when several were varied."""
    why_not = []
    for ranges in (_SPREAD, _SHRINK):
        values, changes = varied(ch.values, paths, ctx.rng, ranges)
        said = describe(changes, ch.names, ch.what)
        try:
            ref_out, state = ch.reference(values)
            rejected = _rejects(ref_out, base)
            if rejected is not None:
                raise _Refused(rejected)
            out, judged, seen = ch.candidate(state, values)
        except _Refused as exc:
            why_not.append(f"{said}: {exc}")
            continue
        except _CandidateRaised as exc:
            return warned(ch.check, f"ModelNew {ch.verb} with {said} (the reference takes them) raised {exc} — "
                          "specialised to the benchmark's constants, but not wrong", "incorrect")
        c = judged_compare(judged, seen, out, ref_out, _tight_atol(ctx))
        del state, judged
        if not c.ok:
            alone = _alone(ctx, ch, changes) if len(changes) > 1 else ""
            return failed(ch.check, f"ModelNew {ch.verb} with other floats than the benchmark's ({said}): "
                          f"{c.message}{alone} — {ch.missed}", "incorrect")
        return passed(ch.check, f"{ch.verb} with {said}: {c.message}", "incorrect")
    return skipped(ch.check, "the reference does not take other values: " + "; ".join(why_not), "incorrect")


def _alone(ctx: VerifyContext, ch: _Channel, changes: dict[Path, tuple[float, float]], most: int = 4) -> str:
    """After a miss with several values varied: which of them, varied alone, the candidate misses on (the first
    `most`; only on the way to a failure)."""
    wrong, right = [], []
    for path, (_, new) in list(changes.items())[:most]:
        said = describe({path: changes[path]}, ch.names, ch.what)
        values = _replaced(list(ch.values), path, type(_get(ch.values, path))(new))
        try:
            ref_out, state = ch.reference(values)
            out, judged, seen = ch.candidate(state, values)
        except Exception:  # noqa: BLE001 — the attribution is a courtesy; the miss stands
            continue
        (right if judged_compare(judged, seen, out, ref_out, _tight_atol(ctx)).ok else wrong).append(said)
    if not wrong:
        return ""
    return f"; varied alone, wrong with {', '.join(wrong)}" + (f", right with {', '.join(right)}" if right else "")


def _eval_like(ctx: VerifyContext, ref_v: torch.nn.Module, cand_v: torch.nn.Module) -> None:
    if not ctx.ref.training:
        ref_v.eval()
    if not ctx.cand.training:
        cand_v.eval()


# ---------------------------------------------------------------------------------------- init_constants
def check_init_constants(ctx: VerifyContext) -> CheckResult:
    name = "init_constants"
    init = ctx.init_inputs
    rebuild = ctx.rebuild
    if init is None or rebuild is None:
        return skipped(name, "no way to build other instances here", "incorrect")
    paths = float_paths(list(init))
    if not paths:
        return skipped(name, "no non-integral float among get_init_inputs()", "incorrect")
    ref_bytes = sum(p.numel() * p.element_size() for p in ctx.ref.parameters())
    from .budget import Budget

    x = ctx.make_inputs(ctx.seed())
    budget = Budget.for_problem(ctx.device, x, list(ctx.ref.parameters()))
    if 2 * ref_bytes > budget.allowance:
        return skipped(name, f"another instance of each model ({2 * ref_bytes / 2**20:.0f} MiB) is beyond the check "
                       "budget", "incorrect")
    with preserved_state(ctx.ref):
        base = run(ctx.ref, clone_inputs(x))
    ref_shapes = {k: tuple(v.shape) for k, v in ctx.ref.state_dict().items() if isinstance(v, torch.Tensor)}

    def reference(args: list[Any]) -> tuple[Any, Any]:
        try:
            ref_v, cand_v = rebuild(ctx.seed(), args)
        except ReferenceRejected as exc:
            raise _Refused(f"the reference {exc}") from None
        except Exception as exc:  # noqa: BLE001 — the candidate's constructor
            raise _CandidateRaised("", exc) from None
        shapes = {k: tuple(v.shape) for k, v in ref_v.state_dict().items() if isinstance(v, torch.Tensor)}
        if shapes != ref_shapes:
            raise _Refused("the reference's state changes names or shapes (the float sizes the model)")
        _eval_like(ctx, ref_v, cand_v)
        try:
            ref_out = run(ref_v, clone_inputs(x))
            sync(ctx.device)
        except Exception as exc:  # noqa: BLE001 — the reference does not run with these values
            raise _Refused(f"the reference raised {type(exc).__name__}: {str(exc)[:120]}") from None
        return ref_out, (ref_v, cand_v)

    def candidate(pair: Any, _args: list[Any]) -> tuple[Any, VerifyContext, list[Any]]:
        ref_v, cand_v = pair
        try:
            out = run(cand_v, clone_inputs(x))
            sync(ctx.device)
        except Exception as exc:  # noqa: BLE001
            raise _CandidateRaised(" in forward", exc) from None
        # The rebuilt reference registered as one (context.run seals its outputs across the candidate's calls), and
        # a miss judged against it (its float64 evaluation, not the benchmark's reference's).
        return out, dataclasses.replace(ctx, ref=ref_v, cand=cand_v), x

    channel = _Channel(name, "argument", "built", list(init), _names(type(ctx.ref).__init__, skip_self=True),
                       reference, candidate, "it answers as if built with the benchmark's values (a constructor "
                       "argument baked into the code)")
    return _vary(ctx, channel, paths, base)


# ---------------------------------------------------------------------------------------- scalar_inputs
def check_scalar_inputs(ctx: VerifyContext) -> CheckResult:
    name = "scalar_inputs"
    x = ctx.make_inputs(ctx.seed())
    paths = float_paths(list(x), integral_too=True)
    if not paths:
        return skipped(name, "no Python float among get_inputs()' values", "incorrect")
    with preserved_state(ctx.ref):
        base = run(ctx.ref, clone_inputs(x))

    def reference(xv: list[Any]) -> tuple[Any, Any]:
        try:
            with preserved_state(ctx.ref):
                ref_out = run(ctx.ref, clone_inputs(xv))
            sync(ctx.device)
        except Exception as exc:  # noqa: BLE001 — the reference does not take these values
            raise _Refused(f"the reference raised {type(exc).__name__}: {str(exc)[:120]}") from None
        return ref_out, None

    def candidate(_state: Any, xv: list[Any]) -> tuple[Any, VerifyContext, list[Any]]:
        try:
            with preserved_state(ctx.cand):
                out = run(ctx.cand, clone_inputs(xv))
            sync(ctx.device)
        except Exception as exc:  # noqa: BLE001
            raise _CandidateRaised("", exc) from None
        return out, ctx, xv

    channel = _Channel(name, "input", "called", list(x), _names(ctx.ref.forward, skip_self=False), reference,
                       candidate, "it answers as if called with the benchmark's values (a forward argument baked "
                       "into the code)")
    return _vary(ctx, channel, paths, base)
