"""The reference evaluated in float64, bounded in memory — the one helper every float64 evaluation goes through:
the reference process's trials, the worker's own trials (reference beside the candidate), the precision check,
tolerance_sanity's rounding-noise test and the judge of a miss.

A float64 pass widens the inputs, the parameters and the outputs (2× for fp32, 4× for fp16), so on a large
problem it is the biggest allocation of the whole run. ``evaluate_float64`` asks the check budget (budget.py)
before allocating and takes the first option that fits:

1. the whole batch, as before;
2. a window of rows of the batch — the leading dimension of every input whose leading size is the batch's —
   when the reference is shown batch-separable on these inputs: its own (native dtype) output on the window
   reproduces those rows of its output on the whole batch within rounding. BatchNorm in training mode, a
   reduction over the batch, an input that merely has the batch's size (a square weight) all fail that test.
   The window is the fewest rows that cover SAMPLE_ELEMENTS output elements (a relative L2 error over 256k
   elements is known to about 0.2%; the budget may allow fewer, down to MIN_SAMPLE_ELEMENTS, or half of an output
   smaller than twice that), at a random offset (a candidate cannot know which rows are measured); comparisons then use the same rows of the candidate's and the reference's outputs
   (``Float64Eval.take``);
3. none: the float64-based parts are skipped with the reason (``Float64Eval.note``) — never charged to the
   candidate.
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ..compare import chunk_elements
from .budget import Budget, float64_model_bytes, nbytes, tensors_in, widened_bytes

# A sampled window covers at least this many output elements (or the whole batch): the statistical power of
# the relative L2 error and of the worst-element allowance stays that of a medium-sized output.
MIN_SAMPLE_ELEMENTS = 1 << 16
# ... and no more rows than cover this many: the other process and the allocator hold copies of the whole problem
# at the same time (a window sized to the budget, 2730 of 4096 rows of a 6.4 GB problem, took the GPU to 75 GB).
SAMPLE_ELEMENTS = 1 << 18
# How far the reference's output on a window may be from the same rows of its output on the whole batch and
# still count as the same computation: another batch size may pick another kernel (another summation order,
# TF32 or not), which rounds differently by about the dtype's precision floor; batch dependence (batch
# statistics, a mean over the batch) is off by orders of magnitude more.
_SEPARABLE_REL_L2 = {torch.float64: 1e-12, torch.float32: 5e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}
_SEPARABLE_REL_L2_TF32 = 3e-3

Forward = Callable[[nn.Module, list[Any]], Any]


@dataclass
class Float64Eval:
    """A float64 evaluation: ``outputs`` (flattened; None when there is none) cover the leading ``rows`` of every
    output (None: all of them) of a batch of ``batch`` rows; ``note`` says how it was evaluated or why not."""

    outputs: list[torch.Tensor] | None
    rows: tuple[int, int] | None = None
    batch: int | None = None
    note: str = ""

    @property
    def sampled(self) -> bool:
        return self.rows is not None

    def take(self, t: torch.Tensor) -> torch.Tensor:
        """The rows of ``t`` (a candidate's or the reference's output) that ``outputs`` cover."""
        if self.rows is None or t.dim() == 0:
            return t
        return t[self.rows[0] : self.rows[1]]

    def outside(self, t: torch.Tensor) -> list[torch.Tensor]:
        """The rows of ``t`` that ``outputs`` do not cover, as views (before the window, after it)."""
        if self.rows is None or t.dim() == 0:
            return []
        return [t[: self.rows[0]], t[self.rows[1] :]]


def float64_copy(model: nn.Module) -> nn.Module:
    """A float64 copy of ``model`` that never holds a native-dtype copy on the way (deepcopy then .double() holds
    both: 3× the parameters of an fp32 model at its peak): each floating parameter and buffer is widened first
    and handed to deepcopy as already copied."""
    memo: dict[int, Any] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in memo or not t.is_floating_point():
            continue
        wide = t.detach().to(torch.float64)
        memo[id(t)] = nn.Parameter(wide, requires_grad=t.requires_grad) if isinstance(t, nn.Parameter) else wide
    return copy.deepcopy(model, memo).to(torch.float64)  # tensors kept as plain attributes too


def widen(values: list[Any]) -> list[Any]:
    """float64 copies of the floating tensors, copies of the other tensors (a forward may write its inputs)."""
    return [(x.to(torch.float64, copy=True) if x.is_floating_point() else x.clone()) if isinstance(x, torch.Tensor)
            else copy.deepcopy(x) for x in values]


def batch_size(inputs: list[Any]) -> int | None:
    """The leading size of the largest floating input (the batch), None without a batched floating input."""
    batched = [x for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dim() >= 1]
    if not batched:
        return None
    return int(max(batched, key=lambda x: x.numel()).shape[0])


def window(inputs: list[Any], batch: int, lo: int, hi: int) -> list[Any]:
    """Rows lo:hi of every tensor input whose leading size is the batch's (views); the others as they are."""
    return [x[lo:hi] if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == batch else x for x in inputs]


def evaluate_float64(model: nn.Module, inputs: list[Any], ref_outputs: list[torch.Tensor], *, budget: Budget,
                     forward: Forward, model64: nn.Module | None = None,
                     rng: random.Random | None = None) -> Float64Eval:
    """The float64 evaluation of ``model`` on ``inputs`` within ``budget`` (see the module's options).

    ``ref_outputs``: the model's flattened outputs on these inputs (the separability test compares with them);
    ``model64``: a float64 copy kept by the caller (the trials step one in lockstep with the reference), else one
    is made here and dropped on return; ``forward(model, inputs)`` runs a model (each caller's own: a device
    sync, paired random streams). ``inputs`` are not written: the passes run on copies."""
    outs = tensors_in(ref_outputs)
    params64 = float64_model_bytes(model)  # held by the check whether the caller or this call made the copy
    held = params64 if model64 is not None else 0
    full = params64 + widened_bytes(inputs) + _cost_of_outputs(outs)
    if budget.fits(full, held):
        wide = widen(inputs)
        out64 = forward(model64 if model64 is not None else float64_copy(model), wide)
        return Float64Eval(_flat(out64), note="float64 on the whole batch")
    refused = budget.over(full, "a full float64 pass")
    batch = batch_size(inputs)
    if batch is None or batch < 2:
        return Float64Eval(None, note=f"{refused}; no batch dimension to sample rows of")
    per_row = [o.numel() // batch for o in outs if o.dim() >= 1 and o.shape[0] == batch]
    if len(per_row) != len(outs):
        return Float64Eval(None, note=f"{refused}; an output does not have the batch's {batch} rows (a reduction over "
                                      "the batch?), so rows cannot be sampled")
    rows = _rows_within(budget, inputs, outs, batch, params64, held)
    needed = _rows_needed(batch, sum(per_row))
    if rows < needed:
        return Float64Eval(None, note=f"{refused}; even {needed} of {batch} rows (≥{min_sample(batch, sum(per_row))} "
                                      "output elements) do not fit the budget")
    wanted = min(batch, math.ceil(SAMPLE_ELEMENTS / max(1, sum(per_row))))
    rows = min(rows, wanted, batch - 1)
    lo = (rng or random.Random()).randrange(0, batch - rows + 1)
    hi = lo + rows
    why = _not_separable(model, inputs, outs, batch, lo, hi, forward)
    if why is not None:
        return Float64Eval(None, note=f"{refused}; rows cannot be sampled: {why}")
    out64 = forward(model64 if model64 is not None else float64_copy(model), widen(window(inputs, batch, lo, hi)))
    sampled = sum(per_row) * rows
    return Float64Eval(_flat(out64), (lo, hi), batch,
                       note=f"float64 on rows {lo}:{hi} of {batch} ({sampled} output elements, the reference shown "
                            f"batch-separable on them): {refused}")


def min_sample(batch: int, per_row: int) -> int:
    """Output elements a window must cover: MIN_SAMPLE_ELEMENTS, or half of an output smaller than twice that
    (a loss per sample, a pooled feature: each element sums much of its row's input, and the whole output can
    be under the minimum, so asking for it all would leave the problem without any float64 at all)."""
    return max(1, min(MIN_SAMPLE_ELEMENTS, (batch * per_row) // 2))


def _rows_needed(batch: int, per_row: int) -> int:
    return min(batch, math.ceil(min_sample(batch, per_row) / max(1, per_row)))


def _flat(value: Any) -> list[torch.Tensor]:
    """A forward's outputs flattened as the trials flatten them (Python numbers as 0-d tensors)."""
    from ..compare import OutputStructureError, flatten_outputs

    try:
        return flatten_outputs(value)
    except OutputStructureError:
        return tensors_in(value)


def _cost_of_outputs(outs: list[torch.Tensor]) -> int:
    """The float64 outputs, and as much again for the forward's intermediates (unmeasured: an elementwise chain
    holds about one more tensor of the output's size at a time)."""
    return 2 * widened_bytes(outs)


def _rows_within(budget: Budget, inputs: list[Any], outs: list[torch.Tensor], batch: int, params64: int,
                 held: int) -> int:
    """The most rows whose float64 pass (and the native pass that proves separability) the budget allows."""
    batched = [x for x in inputs if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == batch]
    whole = [x for x in inputs if isinstance(x, torch.Tensor) and not any(x is b for b in batched)]
    fixed = params64 + widened_bytes(whole)
    per_row = (widened_bytes(batched) + _cost_of_outputs(outs) + nbytes(batched) + nbytes(outs)) / batch
    lo, hi = 0, batch
    while lo < hi:  # the largest row count that fits (the cost is linear, the rule may not be)
        mid = (lo + hi + 1) // 2
        if budget.fits(int(fixed + mid * per_row), held):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _not_separable(model: nn.Module, inputs: list[Any], outs: list[torch.Tensor], batch: int, lo: int, hi: int,
                   forward: Forward) -> str | None:
    """Why the reference on rows lo:hi alone does not reproduce rows lo:hi of its outputs on the whole batch
    (None: it does, within rounding). Its buffers (running statistics) are put back afterwards."""
    with _buffers_kept(model) as changed:
        sub = _flat(forward(model, native_copies(window(inputs, batch, lo, hi))))
    if changed():
        return "the reference's forward writes its parameters"
    if len(sub) != len(outs):
        return f"the reference returns {len(sub)} outputs on a window, {len(outs)} on the whole batch"
    tf32 = bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest" or (
        any(o.is_cuda for o in outs) and bool(torch.backends.cudnn.allow_tf32))
    for i, (s, o) in enumerate(zip(sub, outs)):
        full = o[lo:hi]
        if s.shape != full.shape or s.dtype != full.dtype:
            return f"output {i} on rows {lo}:{hi} is {list(s.shape)}, not {list(full.shape)}"
        if not s.is_floating_point():
            if not torch.equal(s.to(full.device), full):
                return f"output {i} on rows {lo}:{hi} differs from those rows on the whole batch"
            continue
        tol = _SEPARABLE_REL_L2_TF32 if tf32 and s.dtype == torch.float32 else _SEPARABLE_REL_L2.get(s.dtype, 1e-3)
        err = _rel_l2(s, full)
        if not err <= tol:  # NaN included
            return (f"output {i} on rows {lo}:{hi} alone differs from those rows on the whole batch by rel L2 {err:.3g} "
                    f"(> {tol:g}: the rows depend on the rest of the batch — batch statistics, a reduction over it)")
    return None


def native_copies(values: list[Any]) -> list[Any]:
    """Copies in the values' own dtypes (the separability pass must not write the caller's inputs)."""
    return [x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x) for x in values]


def _rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ in float64, a chunk at a time; positions where both are the same non-finite value count as
    equal."""
    xs, ys = a.detach().reshape(-1), b.detach().reshape(-1)
    num2 = den2 = 0.0
    step = chunk_elements(ys.numel())
    for start in range(0, ys.numel(), step):
        x = xs[start : start + step].to(ys.device).double()
        y = ys[start : start + step].double()
        same = (x == y) | (torch.isnan(x) & torch.isnan(y))
        num2 += float(torch.where(same, 0.0, x - y).square().sum())
        den2 += float(torch.where(torch.isfinite(y), y, 0.0).square().sum())
    num = math.sqrt(num2)
    return num / (math.sqrt(den2) or 1.0) if math.isfinite(num) else math.inf


@contextlib.contextmanager
def _buffers_kept(model: nn.Module) -> Iterator[Callable[[], bool]]:
    """Buffers and train/eval flags put back after the block (a separability pass must not step BatchNorm's
    running statistics); yields whether a parameter was written (their version counters moved). Parameters are
    not cloned: that would cost the model's size, and a reference writing its weights is no batch-separable
    computation anyway."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    modes = [(m, m.training) for m in model.modules()]
    versions = [(p, p._version) for p in model.parameters()]
    try:
        yield lambda: any(p._version != v for p, v in versions)
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                if b.shape == saved.shape:
                    b.copy_(saved)
        for m, training in modes:
            m.training = training


class LockstepFloat64:
    """The reference's float64 copy over the correctness trials, stepped in lockstep with it (each model is called
    once per trial, so BatchNorm's running statistics stay in step). The copy is made in the first trial, right
    before the reference's own call (both start from the same state), when its parameters fit the check budget;
    each trial's evaluation then goes through evaluate_float64. The first evaluation that cannot be bounded, or
    that fails, ends it for the run, its reason kept in ``note`` — extra evidence, never a verdict."""

    def __init__(self, model: nn.Module, device: torch.device, forward: Forward) -> None:
        self.model = model
        self.device = device
        self.forward = forward
        self.model64: nn.Module | None = None
        self.started = False
        self.note: str | None = None  # why there is no float64 evaluation (any more)
        self.rng = random.Random()

    def before_reference(self, inputs: list[Any]) -> None:
        """Called with each trial's inputs before the reference's own call; the first makes the copy."""
        if self.started:
            return
        self.started = True
        budget = Budget.for_problem(self.device, inputs, self.model)
        cost = float64_model_bytes(self.model)
        if not budget.fits(cost):
            self.give_up(budget.over(cost, "a float64 copy of the reference's parameters"))
            return
        try:
            self.model64 = float64_copy(self.model)
        except Exception as exc:  # noqa: BLE001 — evidence only
            self.give_up(f"no float64 copy of the reference ({type(exc).__name__}: {str(exc)[:200]})")

    def evaluate(self, inputs: list[Any], ref_outputs: list[torch.Tensor]) -> Float64Eval | None:
        """This trial's float64 evaluation (after the reference's own call), or None (``note`` says why)."""
        if self.model64 is None:
            return None
        try:
            budget = Budget.for_problem(self.device, inputs, self.model, ref_outputs)
            view = evaluate_float64(self.model, inputs, ref_outputs, budget=budget, forward=self.forward,
                                    model64=self.model64, rng=self.rng)
            if view.outputs is None and budget.cap is None and budget.available is not None:
                # Without a float64 view the trials compare with the reference alone, in the dtype's band: a
                # correct candidate that rounds otherwise (a TF32 convolution by another cuDNN algorithm, then
                # a batch norm over the whole batch, whose rows cannot be sampled) is charged with a miss. So a
                # pass the footprint rule refuses runs in the memory the device has free, as the judge of a
                # miss does (judge.py); an operator's explicit KFORGE_CHECK_MEMORY still rules.
                free = replace(budget, cap=budget.available)
                wide = evaluate_float64(self.model, inputs, ref_outputs, budget=free, forward=self.forward,
                                        model64=self.model64, rng=self.rng)
                if wide.outputs is not None:
                    view = replace(wide, note=f"{wide.note}, in the memory the device has free ({view.note})")
        except BaseException as exc:  # noqa: BLE001 — the float64 view is extra evidence, never a verdict
            self.give_up(f"the float64 evaluation failed ({type(exc).__name__}: {str(exc)[:200]})")
            return None
        if view.outputs is None:
            self.give_up(view.note)
            return None
        return view

    def evaluate_once(self, inputs: list[Any], ref_outputs: list[torch.Tensor]) -> Float64Eval | None:
        """A float64 evaluation outside the trials (the judge of a timed pair's miss), in the memory the device has
        free (an operator's KFORGE_CHECK_MEMORY still rules); None when there is none. It never ends the copy."""
        if self.model64 is None:
            return None
        try:
            budget = Budget.for_problem(self.device, inputs, self.model, ref_outputs)
            if budget.cap is None and budget.available is not None:
                budget = replace(budget, cap=budget.available)
            view = evaluate_float64(self.model, inputs, ref_outputs, budget=budget, forward=self.forward,
                                    model64=self.model64, rng=self.rng)
        except Exception:  # noqa: BLE001 — no float64 view: the plain comparison stands
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            return None
        return view if view.outputs is not None else None

    def give_up(self, note: str) -> None:
        self.model64 = None
        self.note = note
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def for_check(ctx: Any, inputs: list[Any], ref_out: Any, *, free_memory: bool = False) -> Float64Eval:
    """The float64 evaluation a verification check makes (precision, rounding noise, the judge): a copy of the
    worker's reference made for the call and dropped after it, within the check budget of this problem.

    ``free_memory``: the pass may use what the device has free instead of the footprint rule (an operator's
    explicit KFORGE_CHECK_MEMORY still rules). For the judge of a miss: refused, a correct candidate is charged with
    its rounding, and a batch of one (attention over a long row, say) has no rows to sample instead."""
    from .context import run, tensors

    refs = tensors(ref_out)
    budget = Budget.for_problem(ctx.device, inputs, ctx.ref, refs)
    if free_memory and budget.cap is None and budget.available is not None:
        budget = replace(budget, cap=budget.available)
    return evaluate_float64(ctx.ref, inputs, refs, budget=budget, forward=run, rng=ctx.rng)
