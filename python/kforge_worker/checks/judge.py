"""A candidate's miss of the reference on fresh inputs, judged before it is charged: within the problem's band
it is correct; outside it, it is still rounding when, against the float64 evaluation of the same inputs, the
candidate's relative L2 error is within ROUNDING_MULTIPLE times the reference's own or the dtype's floor (the
precision check's rule). Fresh values can round further from the reference than anything the trials saw — a
TF32 convolution by another cuDNN algorithm errs at other elements than the reference's — while skipped or
partial work misses by orders of magnitude more (a skipped 0.1% of the outputs alone is ~3e-2 of relative L2).

The judge's float64 pass may use the memory the device has free, not only the footprint rule's 2×: it runs only
on a miss, and without it a correct candidate is charged with rounding (a bf16 attention over 8192 keys, batch 1,
differs from PyTorch by 2–4 ulps at randn×4 inputs, and its float64 pass needs ~30× the problem's bytes)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .context import Closeness, compare, has_dropout, Inputs, tensors, VerifyContext
from .budget import is_out_of_memory
from .float64 import for_check
from .output_checks import precision_floor, rel_err, tf32_allowed

# How much more than the reference's own relative error vs float64 a candidate may round (check_precision's).
ROUNDING_MULTIPLE = 10.0


def rounding_only(ctx: VerifyContext, inputs: Inputs | Callable[[], Inputs], out: Any, ref_out: Any) -> bool:
    """Whether the candidate's distance from the reference on `inputs` is rounding (see the module's rule).
    `inputs` may be a function making them (a check that does not hold every input set it ran)."""
    if has_dropout(ctx.ref):
        return False
    try:  # the whole batch or a window of rows proven batch-separable, in the memory the device has free
        view = for_check(ctx, inputs() if callable(inputs) else inputs, ref_out, free_memory=True)
    except Exception as exc:  # noqa: BLE001 — no float64 view: the plain comparison stands
        if is_out_of_memory(exc) and torch.cuda.is_available():
            torch.cuda.empty_cache()  # the forward's intermediates were not in the estimate
        return False
    if view.outputs is None:
        return False  # none within the budget: the plain comparison stands
    outs, refs, refs64 = tensors(out), tensors(ref_out), view.outputs
    if not (len(outs) == len(refs) == len(refs64)):
        return False
    tf32 = tf32_allowed(ctx)
    for o_all, r_all, r64 in zip(outs, refs, refs64):
        if not r_all.is_floating_point() or o_all.shape != r_all.shape:
            continue
        o, r = view.take(o_all), view.take(r_all)
        cand_err, ref_err = rel_err(o, r64), rel_err(r, r64)
        bound = max(ROUNDING_MULTIPLE * ref_err, precision_floor(r.dtype, tf32))
        if view.sampled:
            # Outside the sampled window the candidate's error is at most its distance from the reference plus the
            # reference's own (as measured in the window): a miss there is forgiven only under that upper bound.
            rest = rel_err(view.outside(o_all), view.outside(r_all)) + ref_err
            cand_err = max(cand_err, rest) if math.isfinite(rest) else math.inf
        if not math.isfinite(cand_err) or cand_err > bound:
            return False
    return True


def judged_compare(ctx: VerifyContext, inputs: Inputs | Callable[[], Inputs], out: Any, ref_out: Any, atol: float | None = None) -> Closeness:
    """compare() within the problem's band (or `atol`), a miss then judged against float64 on the same inputs.
    `inputs` must be what both models were given, unchanged (clones were run)."""
    c = compare(out, ref_out, ctx.atol if atol is None else atol, ctx.rtol)
    if c.ok or not rounding_only(ctx, inputs, out, ref_out):
        return c
    return Closeness(True, f"{c.message}, within float64 rounding", c.max_abs, c.rel_l2)
