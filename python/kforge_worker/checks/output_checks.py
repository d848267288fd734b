"""Checks on what the candidate returns: the output contract (type, storage, aliasing, degenerate
answers), tolerance sanity, uninitialised memory, and precision against float64."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from .context import (
    _equal,
    _isclose,
    _overlaps,
    _storage_span,
    clone_inputs,
    compare,
    flatten,
    has_dropout,
    Inputs,
    preserved_state,
    run,
    sync,
    tensors,
    VerifyContext,
)
from ..compare import chunk_elements, precision_floor, timed_precision_bound, without_agreed_non_finite
from .float64 import for_check, widen
from .instrument import poisoned_allocations
from .integrity import lingering_threads, native_threads
from .result import CheckResult, failed, passed, skipped, warned
from ..timed_inputs import internal_overlaps, overlapping_outputs


def _hidden_representation(out: Any, ref_out: Any) -> list[str]:
    """Outputs whose memory does not hold the values torch's ops read from them (red team round 10): a negative or
    conjugate bit the reference's output at that place does not carry (torch._neg_view: torch ops read -memory; a
    kernel on data_ptr(), a serialiser of raw bytes, numpy see the memory), and bool outputs holding bytes other than
    0 and 1 (a mask of 0/255 viewed as bool: compares as True, sums and casts to other values)."""
    found = []
    refs = flatten(ref_out)
    for i, o in enumerate(flatten(out)):
        if type(o) is not torch.Tensor or o.layout != torch.strided or o.is_meta:
            continue
        r = refs[i] if i < len(refs) and isinstance(refs[i], torch.Tensor) else None
        for bit in ("is_neg", "is_conj"):
            if getattr(o, bit)() and not (r is not None and getattr(r, bit)()):
                found.append(f"output {i}: a view with its {bit[3:]} bit set (its memory holds other values than "
                             "the ones torch ops read)")
        if o.dtype == torch.bool and o.numel():
            raw = o.view(torch.uint8)
            if bool((raw > 1).any()):
                found.append(f"output {i}: bool tensor holding bytes other than 0/1 ({int((raw > 1).sum())} of "
                             f"{o.numel()}, e.g. {int(raw.max())}): sums and casts read the bytes")
    return found


def _structure(value: Any) -> Any:
    """The container structure a caller unpacks: a tensor, a sequence (list, tuple, torch's named tuples alike) of
    structures, a dict by keys, or another value's type."""
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, (list, tuple)):
        return ("sequence", tuple(_structure(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _structure(v)) for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))))
    return type(value).__name__


def _describe_structure(s: Any) -> str:
    if isinstance(s, tuple) and s and s[0] == "sequence":
        return f"a sequence of {len(s[1])} ({', '.join(_describe_structure(c) for c in s[1][:4])})"
    if isinstance(s, tuple) and s and s[0] == "dict":
        return f"a dict of {len(s[1])}"
    return "a tensor" if s == "tensor" else f"a {s}"


def _structure_difference(out: Any, ref_out: Any) -> str | None:
    """Red team round 11 (adv_list_output): outputs compared flattened pass a tensor wrapped in a list where the
    reference returns a tensor; the caller's `model(x).sum()` or `values, indices = model(x)` does not."""
    mine, theirs = _structure(out), _structure(ref_out)
    if mine == theirs:
        return None
    return (f"the output is {_describe_structure(mine)} where the reference returns {_describe_structure(theirs)} "
            "(same values flattened; a caller unpacks the reference's structure)")


def _layout_differences(out: Any, ref_out: Any) -> list[str]:
    """Outputs with the reference's shape but not its memory order (a transposed view where the reference is
    contiguous): said, not failed — every torch op reads strides."""
    found = []
    for i, (o, r) in enumerate(zip(flatten(out), flatten(ref_out))):
        if (type(o) is torch.Tensor and isinstance(r, torch.Tensor) and o.layout == torch.strided
                and o.shape == r.shape and o.is_contiguous() != r.is_contiguous()):
            found.append(f"output {i}: strides {tuple(o.stride())}, contiguous={o.is_contiguous()}, the reference's "
                         f"{tuple(r.stride())}, contiguous={r.is_contiguous()}")
    return found


def check_output_contract(ctx: VerifyContext) -> list[CheckResult]:
    """output_type, output_aliasing, input_mutation, degenerate_output on one fresh input set.

    The fresh set is never handed to either model: each gets a clone, and the set itself is what a call's inputs
    are compared with afterwards (no pristine copy of its own). Each copy is dropped as soon as its comparison is
    made, the reference's output and the candidate's inputs before the later calls of the ring: beyond the call in
    flight the check holds one input set and one output (issue 17: a problem's checks within 2.5x its own)."""
    inputs = ctx.make_inputs(ctx.seed())
    ref_in = clone_inputs(inputs)
    ref_out = run(ctx.ref, ref_in)
    ref_mutates = not all(_same_bits(a, b) for a, b in zip(ref_in, inputs) if isinstance(a, torch.Tensor))
    ref_alias_inputs = any(_overlaps(_storage_span(r), _storage_span(x)) for r in tensors(ref_out)
                           for x in ref_in if isinstance(x, torch.Tensor))
    del ref_in
    cand_in = clone_inputs(inputs)
    layout = [(x.data_ptr(), tuple(x.shape), x.stride(), x.dtype) if isinstance(x, torch.Tensor) else None
              for x in cand_in]
    out = run(ctx.cand, cand_in)
    sync(ctx.device)
    results: list[CheckResult] = []

    # output_type: a plain tensor (no subclass, no lazy wrapper), dense, on the device, materialised.
    bad_types = [f"output {i}: {type(o).__module__}.{type(o).__qualname__}" for i, o in enumerate(flatten(out))
                 if isinstance(o, torch.Tensor) and type(o) is not torch.Tensor]
    not_tensor = [f"output {i}: {type(o).__name__}" for i, o in enumerate(flatten(out))
                  if not isinstance(o, torch.Tensor) and isinstance(flatten(ref_out)[i] if i < len(flatten(ref_out))
                                                                    else None, torch.Tensor)]
    weird = [f"output {i}: layout {o.layout}, device {o.device}" for i, o in enumerate(tensors(out))
             if type(o) is torch.Tensor and (o.layout != torch.strided or o.is_meta)]
    weird += _hidden_representation(out, ref_out)
    overlap = overlapping_outputs(out, internal_overlaps(ref_out))
    if bad_types or not_tensor or weird:
        results.append(failed("output_type", "type(out) is not torch.Tensor — " + "; ".join(bad_types + not_tensor + weird)))
    elif overlap:
        results.append(failed("output_type", overlap))
    elif structure := _structure_difference(out, ref_out):
        results.append(failed("output_type", structure, "incorrect"))
    elif other_layout := _layout_differences(out, ref_out):
        results.append(warned("output_type", f"{len(tensors(out))} plain torch.Tensor output(s), right values in "
                              "another memory layout than the reference's — " + "; ".join(other_layout) + " (torch ops "
                              "follow strides; code that reads the pointer as contiguous, or .view(), does not)"))
    else:
        results.append(passed("output_type", f"{len(tensors(out))} plain torch.Tensor output(s)"))

    # input_mutation (reported after output_aliasing): the candidate's inputs are bitwise unchanged (unless the
    # reference mutates its own), compared with the fresh set neither model was given.
    changed = []
    for j, (x, before, lay) in enumerate(zip(cand_in, inputs, layout)):
        if not isinstance(x, torch.Tensor):
            continue
        now = (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype)
        if now != lay:
            changed.append(f"input {j} was resized/re-pointed ({lay[1]} -> {now[1]})")
        elif not _same_bits(x, before):
            n = int((x != before).sum())
            changed.append(f"input {j}: {n}/{x.numel()} elements overwritten")
    if changed and not ref_mutates:
        mutation = failed("input_mutation", "; ".join(changed))
    elif changed:
        mutation = passed("input_mutation", "inputs changed, as the reference's own forward changes them")
    else:
        mutation = passed("input_mutation", "inputs bitwise unchanged after the call")

    # output_aliasing: own storage — not an input's, not a parameter's or buffer's, not the reference's output.
    outs = [o for o in tensors(out) if type(o) is torch.Tensor]
    problems = []
    for i, o in enumerate(outs):
        span = _storage_span(o)
        for j, x in enumerate(cand_in):
            if isinstance(x, torch.Tensor) and _overlaps(span, _storage_span(x)) and not ref_alias_inputs:
                problems.append(f"output {i} shares storage with input {j}")
        for name, p in list(ctx.cand.named_parameters()) + list(ctx.cand.named_buffers()):
            if _overlaps(span, _storage_span(p)):
                problems.append(f"output {i} is a view of the module's own tensor {name}")
        for r in tensors(ref_out):
            if _overlaps(span, _storage_span(r)):
                problems.append(f"output {i} is the reference's own output")
    degenerate = _degenerate(out, ref_out, cand_in, ctx)
    del cand_in, ref_out, out
    # Later calls must not hand back storage an earlier result (still alive) holds. Several calls, all kept:
    # a ring of kept buffers rotated call by call hands back the first one only on its n-th call.
    problems += _reused_storage(ctx, inputs, outs)
    if problems:
        results.append(failed("output_aliasing", "; ".join(sorted(set(problems)))))
    else:
        results.append(passed("output_aliasing", "outputs own their storage (no input, parameter, buffer, "
                                                 "reference-output or cross-call aliasing)"))
    results.append(mutation)
    results.append(degenerate)
    return results


RING_CALLS = 4  # later calls whose outputs are kept alive together (a ring of up to this many buffers is seen)


def _reused_storage(ctx: VerifyContext, inputs: Inputs, outs: list[torch.Tensor]) -> list[str]:
    """Findings for outputs of later calls that share storage with an earlier call's output, all held alive;
    as many later calls as the check budget lets it hold beside the input set and the first output (at least one)."""
    from .budget import Budget, nbytes

    out_bytes = max(nbytes(outs), 1)
    budget = Budget.for_problem(ctx.device, inputs, outs)
    room = budget.allowance - nbytes(inputs) - out_bytes
    calls = max(1, min(RING_CALLS, room // out_bytes))
    held: list[list[torch.Tensor]] = [outs]
    found: list[str] = []
    for call in range(1, calls + 1):
        later = [o for o in tensors(run(ctx.cand, clone_inputs(inputs))) if type(o) is torch.Tensor]
        sync(ctx.device)
        for earlier_call, earlier in enumerate(held):
            for i, (a, b) in enumerate(zip(earlier, later)):
                if _overlaps(_storage_span(a), _storage_span(b)):
                    found.append(f"output {i} of calls {earlier_call + 1} and {call + 1} is the same storage (a "
                                 "buffer the candidate keeps and rewrites: an earlier result changes under the "
                                 "caller)")
        if found:
            break
        held.append(later)
    return found


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, NaN equal to NaN, a chunk at a time (nan_to_num of a whole input would copy it twice)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    xs, ys = a.reshape(-1), b.reshape(-1)
    step = chunk_elements(xs.numel())
    for start in range(0, xs.numel(), step):
        x, y = xs[start : start + step], ys[start : start + step]
        if not _equal(torch.nan_to_num(x), torch.nan_to_num(y)):
            return False
    return True


_sleep = time.sleep  # bound before the candidate is imported


def check_settled_outputs(ctx: VerifyContext, calls: int = 2, settle_s: float = 0.03) -> CheckResult:
    """Outputs are complete when forward returns: each output is copied right after forward returns and
    the device syncs, and compared bitwise with itself `settle_s` later (after another sync). A change
    means something (a thread, native or Python, or a callback) still writes them after the return.
    The OS's thread list (/proc/self/task) is read before the call and after: a thread that forward
    started and left running is named too. Cheap: `calls` forwards and a few tens of ms."""
    changes: list[str] = []
    left: dict[int, str] = {}
    for call in range(calls):
        inputs = clone_inputs(ctx.make_inputs(ctx.seed()))
        threads = native_threads()
        out = run(ctx.cand, inputs)
        sync(ctx.device)
        first = [torch.Tensor.clone(torch.Tensor.detach(t)) for t in tensors(out)]
        _sleep(settle_s)
        sync(ctx.device)
        for i, (now, then) in enumerate(zip(tensors(out), first)):
            now = torch.Tensor.detach(now)
            if now.shape != then.shape or now.dtype != then.dtype:
                changes.append(f"call {call}: output {i} changed shape/dtype after forward returned "
                               f"({list(then.shape)} {then.dtype} -> {list(now.shape)} {now.dtype})")
            elif not _equal(torch.nan_to_num(now), torch.nan_to_num(then)):
                n = int((torch.nan_to_num(now) != torch.nan_to_num(then)).sum())
                changes.append(f"call {call}: output {i} changed after forward returned ({n}/{now.numel()} "
                               f"elements differ {settle_s * 1e3:.0f} ms later)")
        left.update(lingering_threads(threads))
        del out, first
    if changes or left:
        parts = changes[:3]
        if left:
            parts.append("forward left OS thread(s) running after it returned: "
                         + ", ".join(f"{tid} ({name})" for tid, name in list(left.items())[:6]))
        return failed("output_settled", "; ".join(parts) + " — the outputs were not finished when forward returned")
    return passed("output_settled", f"outputs of {calls} calls bitwise unchanged {settle_s * 1e3:.0f} ms after "
                                    "forward returned; no thread left running (OS thread list)")


def _degenerate(out: Any, ref_out: Any, inputs: Inputs, ctx: VerifyContext) -> CheckResult:
    """Zero, constant or input-copy outputs where the reference's output is none of those."""
    findings = []
    for i, (o, r) in enumerate(zip(tensors(out), tensors(ref_out))):
        if not r.is_floating_point() or r.numel() < 2 or o.shape != r.shape:
            continue
        r_const = bool((r == r.reshape(-1)[0]).all())
        if r_const:
            continue
        o2 = o.detach().to(r.device)
        if o2.numel() and bool((o2 == o2.reshape(-1)[0]).all()):
            findings.append(f"output {i} is the constant {float(o2.reshape(-1)[0]):.6g} everywhere "
                            f"(reference spans {float(r.min()):.4g}..{float(r.max()):.4g})")
            continue
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.shape == r.shape and x.dtype == o2.dtype and _equal(o2, x) \
                    and not _equal(r, x):
                findings.append(f"output {i} is a copy of input {j}")
    if findings:
        return failed("degenerate_output", "; ".join(findings))
    return passed("degenerate_output", "outputs are neither constant nor copies of an input")


def check_tolerance(ctx: VerifyContext) -> CheckResult:
    """Would zeros, a constant or an input pass this problem's tolerance? Then tighten it and say so."""
    inputs = ctx.make_inputs(ctx.seed())
    ref_out = run(ctx.ref, clone_inputs(inputs))
    passing = []
    for i, r in enumerate(tensors(ref_out)):
        if not r.is_floating_point() or r.numel() == 0:
            continue
        mean = float(_chunked_sum(r, lambda c: c)) / r.numel()
        mean_abs = float(_chunked_sum(r, lambda c: c.abs())) / r.numel()
        trivial: dict[str, Any] = {"zeros": 0.0, "its mean": mean}
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.shape == r.shape:
                trivial[f"input {j}"] = x
        for label, t in trivial.items():
            if _all_close_chunked(t, r, ctx.atol, ctx.rtol):
                passing.append((i, label, mean_abs))
    noise = _rounding_noise(ctx, inputs, ref_out, {i for i, _, _ in passing})
    passing = [p for p in passing if p[0] not in noise]
    if not passing:
        ctx.notes["tight_atol"] = ctx.atol
        if noise:
            return warned("tolerance_sanity", "; ".join(noise.values()) + f": atol {ctx.atol:g}/rtol {ctx.rtol:g} kept "
                          "(a trivial output is as right as any there; no tighter atol is resolvable)", "incorrect")
        return passed("tolerance_sanity", f"zeros, constants and inputs all fail atol {ctx.atol:g}/rtol {ctx.rtol:g}")
    scale = min(m for _, _, m in passing) or 1.0
    tight = min(ctx.atol, 1e-3 * scale)
    ctx.notes["tight_atol"] = tight
    which = ", ".join(f"{label} (output {i})" for i, label, _ in passing)
    return warned("tolerance_sanity", f"{which} would pass atol {ctx.atol:g}/rtol {ctx.rtol:g} on this problem "
                                      f"(mean |ref| {scale:.3g}); verification uses atol {tight:.3g} instead",
                  "incorrect")


def _rounding_noise(ctx: VerifyContext, inputs: list[Any], ref_out: Any, outputs: set[int]) -> dict[int, str]:
    """Which of `outputs` are rounding noise: PyTorch's own relative L2 error against float64 is at least half its
    magnitude (the mean of normalised values: exactly 0, computed as ~1e-9 of noise). A trivial output passing
    there is not a weak tolerance, and an atol tightened below the noise would only reject honest summation
    orders; other outputs keep the tightening."""
    if not outputs or has_dropout(ctx.ref):  # float64 dropout draws other masks: no rounding to compare
        return {}
    try:
        view = for_check(ctx, inputs, ref_out)
    except Exception:  # noqa: BLE001 — without float64 every tightening stands
        return {}
    if view.outputs is None:
        return {}
    found = {}
    for i, (r, r64) in enumerate(zip(tensors(ref_out), view.outputs)):
        r = view.take(r)
        if i in outputs and r.shape == r64.shape:
            err = rel_err(r, r64)
            if math.isfinite(err) and err >= 0.5:
                found[i] = f"output {i} is rounding noise (PyTorch's own rel L2 vs float64 {err:.3g})"
    return found


def _chunked_sum(t: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> float:
    flat = t.detach().reshape(-1)
    step = chunk_elements(flat.numel())
    return sum(float(fn(flat[i : i + step].double()).sum()) for i in range(0, flat.numel(), step))


def _all_close_chunked(value: Any, r: torch.Tensor, atol: float, rtol: float) -> bool:
    """isclose(value, r).all() in float64 chunks; value is a scalar or a tensor of r's shape."""
    flat_r = r.detach().reshape(-1)
    flat_v = value.detach().reshape(-1) if isinstance(value, torch.Tensor) else None
    step = chunk_elements(flat_r.numel())
    for i in range(0, flat_r.numel(), step):
        rc = flat_r[i : i + step].double()
        vc = flat_v[i : i + step].double().to(rc.device) if flat_v is not None else torch.full_like(rc, value)
        if not bool(_isclose(vc, rc, rtol=rtol, atol=atol).all()):
            return False
    return True


def rel_err(a: torch.Tensor | list[torch.Tensor], b: torch.Tensor | list[torch.Tensor]) -> float:
    """‖a − b‖ / ‖b‖ in float64 chunks (a and b may be lists of parts: the rows outside a sampled window)."""
    num = den = 0.0
    for pa, pb in zip(a, b) if isinstance(a, list) else [(a, b)]:
        fa, fb = pa.detach().reshape(-1), pb.detach().reshape(-1)
        step = chunk_elements(fb.numel())
        for i in range(0, fb.numel(), step):
            x, y = without_agreed_non_finite(fa[i : i + step].double().to(fb.device), fb[i : i + step].double())
            num += float((x - y).square().sum())
            den += float(y.square().sum())
    return math.sqrt(num) / (math.sqrt(den) or 1.0)


def check_tight_tolerance(ctx: VerifyContext) -> CheckResult | None:
    tight = ctx.notes.get("tight_atol")
    if tight is None or tight >= ctx.atol:
        return None
    inputs = ctx.make_inputs(ctx.seed())
    ref_out = run(ctx.ref, clone_inputs(inputs))
    out = run(ctx.cand, clone_inputs(inputs))
    c = compare(out, ref_out, tight, ctx.rtol)
    if c.ok:
        return passed("tight_tolerance", f"passes the tightened atol {tight:.3g}: {c.message}", "incorrect")
    return failed("tight_tolerance", f"fails the tightened atol {tight:.3g} (the problem's own tolerance would "
                                     f"accept a trivial output): {c.message}", "incorrect")


def check_uninitialized(ctx: VerifyContext) -> CheckResult:
    inputs = ctx.make_inputs(ctx.seed())
    ref_out = run(ctx.ref, clone_inputs(inputs))  # kept alive on purpose: its memory is not free to reuse
    sizes = sorted({t.numel() * t.element_size() for t in tensors(ref_out) + [x for x in inputs
                                                                            if isinstance(x, torch.Tensor)]})
    with poisoned_allocations(ctx.device, sizes):
        out = run(ctx.cand, clone_inputs(inputs))
        sync(ctx.device)
    findings = []
    fully = False
    for i, (o, r) in enumerate(zip(tensors(out), tensors(ref_out))):
        if not o.is_floating_point() or o.shape != r.shape:
            continue
        o2 = o.detach().to(r.device)
        poisoned = int((torch.isnan(o2) & ~torch.isnan(r)).sum())
        if poisoned:
            fully = fully or poisoned == o2.numel()
            findings.append(f"output {i}: {poisoned}/{o2.numel()} elements come back as the poison (NaN) when "
                            "freed memory is poisoned")
    if not findings:
        return passed("uninitialized_memory", "outputs fully written with the allocator poisoned (NaN)", "incorrect")
    if fully:
        return failed("uninitialized_memory", "; ".join(findings) + " — the output is never written: it passes only "
                      "by returning memory that still holds an earlier (the reference's) result")
    return failed("uninitialized_memory", "; ".join(findings) + " — reads or returns uninitialised memory",
                  "incorrect")


def _where_reference_finite(o: torch.Tensor, r: torch.Tensor,
                            r64: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """The elements where the reference's own output is finite. Where it overflows its dtype (fp16 x ** 3 past
    65504) float64 is no yardstick: PyTorch's answer there is inf, a candidate's must be the same (the trials
    compare it), and one inf made both errors infinite, so that the reference itself failed the check."""
    finite = torch.isfinite(r)
    overflowed = int(finite.numel() - finite.sum())
    if not overflowed:
        return o, r, r64, 0
    finite = finite.to(o.device)
    return o[finite], r[finite.to(r.device)], r64[finite.to(r64.device)], overflowed


def check_precision(ctx: VerifyContext) -> CheckResult:
    """Candidate's error against float64 vs PyTorch's own error: lower precision than the dtype allows."""
    inputs = ctx.make_inputs(ctx.seed())
    if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs):
        return skipped("precision", "no floating-point inputs", "incorrect")
    if has_dropout(ctx.ref):
        return skipped("precision", "active dropout: a float64 copy draws other masks, so its error is no yardstick",
                       "incorrect")
    ref_out = run(ctx.ref, clone_inputs(inputs))
    out = run(ctx.cand, clone_inputs(inputs))
    try:
        view = for_check(ctx, inputs, ref_out)  # the whole batch, a proven window of rows, or why neither
    except Exception as exc:  # noqa: BLE001
        return skipped("precision", f"no float64 evaluation of the reference ({type(exc).__name__}: "
                                    f"{str(exc)[:200]})", "incorrect")
    if view.outputs is None:
        return skipped("precision", f"no float64 evaluation within the check budget: {view.note}", "incorrect")
    tf32 = tf32_allowed(ctx)
    lines = []
    scope = f" [{view.note}]" if view.sampled else ""
    bounds: dict[int, float] = {}
    for i, (o_all, r_all, r64) in enumerate(zip(tensors(out), tensors(ref_out), view.outputs)):
        if not r_all.is_floating_point() or o_all.shape != r_all.shape:
            continue
        o, r = view.take(o_all), view.take(r_all)
        o, r, r64, overflowed = _where_reference_finite(o, r, r64)
        cand_err = rel_err(o, r64)
        ref_err = rel_err(r, r64)
        floor = precision_floor(r.dtype, tf32)
        lines.append(f"output {i} ({str(r.dtype).replace('torch.', '')}): rel L2 vs fp64 {cand_err:.3g}, "
                     f"PyTorch's own {ref_err:.3g}"
                     + (f" (over the elements PyTorch's own output holds finite; {overflowed} not)" if overflowed else ""))
        if view.sampled:
            # The rows outside the window have no float64 value: the candidate's distance from the reference
            # there, less the reference's own error (as measured in the window), is a lower bound of its error —
            # a candidate precise only where it might be measured is caught by it.
            rest = rel_err(view.outside(o_all), view.outside(r_all)) - ref_err
            if not math.isfinite(rest) or rest > cand_err:
                cand_err = rest
                lines[-1] += f"; outside the sampled rows at least {rest:.3g} (its distance from PyTorch's)"
        if not math.isfinite(cand_err) or (cand_err > 10 * ref_err and cand_err > floor):
            return failed("precision", f"{lines[-1]} — over 10× PyTorch's error and above {floor:g} for this dtype"
                          f"{' (TF32 allowed)' if tf32 else ' (TF32 off)'}: computed in lower precision{scope}",
                          "incorrect")
        bound = timed_precision_bound(ref_err, r.dtype, tf32)
        if bound is not None:
            bounds[i] = bound
    # The same rule for the timing-like loop's calls on get_inputs() values (timed_outputs): a path taken only when
    # timed may not compute in lower precision where the pass mark would not see it (red team round 13).
    ctx.notes["timed_precision"] = bounds
    return passed("precision", ("; ".join(lines) or "no floating outputs") + scope, "incorrect")


def tf32_matmuls() -> bool:
    return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"


def tf32_allowed(ctx: VerifyContext) -> bool:
    """Whether PyTorch's settings let the reference's heavy operators round their fp32 operands to TF32: matmuls
    by the matmul switch, convolutions by cuDNN's (on by default) — cuDNN then picks a TF32 algorithm or not per
    layout and shape, so the reference's own error is no bound on a candidate's same convolution."""
    return tf32_matmuls() or ("conv" in ctx.ref_families and bool(torch.backends.cudnn.allow_tf32))




def run_float64(ref64_model: nn.Module, inputs: list[Any]) -> Any:
    """The float64 copy's outputs on float64 copies of `inputs`, its state restored — unbounded: the checks go
    through float64.for_check, which budgets the pass (kept for callers that hold a small model)."""
    with preserved_state(ref64_model):
        return run(ref64_model, widen(inputs))
