"""A candidate's miss of the reference on fresh inputs, judged before it is charged: within the problem's band
it is correct; outside it, it is still rounding when, against the float64 evaluation of the same inputs, the
candidate's relative L2 error is within ROUNDING_MULTIPLE times the reference's own or the dtype's floor (the
precision check's rule). Fresh values can round further from the reference than anything the trials saw — a
TF32 convolution by another cuDNN algorithm errs at other elements than the reference's — while skipped or
partial work misses by orders of magnitude more (a skipped 0.1% of the outputs alone is ~3e-2 of relative L2)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .context import Closeness, compare, has_dropout, Inputs, tensors, VerifyContext
from .output_checks import float64_copy, precision_floor, rel_err, run_float64, tf32_allowed

# How much more than the reference's own relative error vs float64 a candidate may round (check_precision's).
ROUNDING_MULTIPLE = 10.0


def rounding_only(ctx: VerifyContext, inputs: Inputs | Callable[[], Inputs], out: Any, ref_out: Any) -> bool:
    """Whether the candidate's distance from the reference on `inputs` is rounding (see the module's rule).
    `inputs` may be a function making them (a check that does not hold every input set it ran)."""
    if has_dropout(ctx.ref):
        return False
    try:
        ref64 = run_float64(float64_copy(ctx.ref), inputs() if callable(inputs) else inputs)
    except Exception:  # noqa: BLE001 — no float64 view: the plain comparison stands
        return False
    outs, refs, refs64 = tensors(out), tensors(ref_out), tensors(ref64)
    if not (len(outs) == len(refs) == len(refs64)):
        return False
    tf32 = tf32_allowed(ctx)
    for o, r, r64 in zip(outs, refs, refs64):
        if not r.is_floating_point() or o.shape != r.shape:
            continue
        cand_err, ref_err = rel_err(o, r64), rel_err(r, r64)
        if not math.isfinite(cand_err) or cand_err > max(ROUNDING_MULTIPLE * ref_err, precision_floor(r.dtype, tf32)):
            return False
    return True


def judged_compare(ctx: VerifyContext, inputs: Inputs | Callable[[], Inputs], out: Any, ref_out: Any, atol: float | None = None) -> Closeness:
    """compare() within the problem's band (or `atol`), a miss then judged against float64 on the same inputs.
    `inputs` must be what both models were given, unchanged (clones were run)."""
    c = compare(out, ref_out, ctx.atol if atol is None else atol, ctx.rtol)
    if c.ok or not rounding_only(ctx, inputs, out, ref_out):
        return c
    return Closeness(True, f"{c.message}, within float64 rounding", c.max_abs, c.rel_l2)
