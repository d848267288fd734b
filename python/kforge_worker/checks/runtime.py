"""Runtime checks: the candidate is called on inputs it cannot predict, and what it returns is examined.

Every check takes a `VerifyContext` (models, an input factory keyed by secret seeds, tolerance, device,
the static scan, the instruments) and returns one `CheckResult`. Checks never leave the models changed:
parameters, buffers and train/eval mode are restored afterwards (`preserved_state`).
"""

from __future__ import annotations

import contextlib
import math
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from .instrument import ExtensionRecorder, OpRecorder, poisoned_allocations
from .integrity import AuditMonitor, IntegritySnapshot, ThreadCount
from .ops import CONDEMNING, aten_family
from .result import CheckResult, failed, passed, skipped, warned
from .static_scan import ScanReport

Inputs = list[Any]
_CHUNK = 1 << 24
# Bound before any candidate is imported: a candidate that patches torch.isclose/equal cannot fool these.
_isclose = torch.isclose
_equal = torch.equal


@dataclass
class VerifyContext:
    ref: nn.Module
    cand: nn.Module
    make_inputs: Callable[[int], Inputs]  # secret-seeded fresh inputs on the problem's device
    device: torch.device
    atol: float
    rtol: float
    scan: ScanReport
    extensions: ExtensionRecorder
    audit: AuditMonitor | None = None
    snapshot: IntegritySnapshot | None = None
    rng: random.Random = field(default_factory=lambda: random.Random())
    ref_families: frozenset[str] = frozenset()
    threads_before: ThreadCount | None = None
    # Filled by the checks for later ones (tolerance tightening, ops seen).
    notes: dict[str, Any] = field(default_factory=dict)

    def seed(self) -> int:
        return self.rng.randrange(1, 2**31 - 1)


# --------------------------------------------------------------------------------------------- helpers
def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        out: list[Any] = []
        for item in value:
            out.extend(flatten(item))
        return out
    return [value]


def clone_inputs(inputs: Inputs) -> Inputs:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def run(model: nn.Module, inputs: Inputs) -> Any:
    with torch.no_grad():
        return model(*inputs)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in flatten(value) if isinstance(t, torch.Tensor)]


@dataclass
class Closeness:
    ok: bool
    message: str
    max_abs: float = 0.0
    rel_l2: float = 0.0


def compare(out: Any, ref: Any, atol: float, rtol: float) -> Closeness:
    """allclose per output (NaN never passes), with the worst error, over flattened outputs."""
    outs, refs = flatten(out), flatten(ref)
    if len(outs) != len(refs):
        return Closeness(False, f"{len(outs)} outputs vs reference {len(refs)}")
    worst, worst_rel = 0.0, 0.0
    for i, (o, r) in enumerate(zip(outs, refs)):
        if not isinstance(r, torch.Tensor):
            if o != r:
                return Closeness(False, f"output {i}: {o!r} vs {r!r}")
            continue
        if not isinstance(o, torch.Tensor):
            return Closeness(False, f"output {i}: {type(o).__name__}, not a tensor")
        if tuple(o.shape) != tuple(r.shape):
            return Closeness(False, f"output {i}: shape {list(o.shape)} vs {list(r.shape)}")
        o2 = torch.Tensor.to(torch.Tensor.detach(o), r.device)
        if not r.is_floating_point():
            if not _equal(o2.to(r.dtype), r):
                return Closeness(False, f"output {i}: integer outputs differ")
            continue
        bad, nan, max_abs, diff_sq, ref_sq = 0, 0, 0.0, 0.0, 0.0
        flat_o, flat_r = o2.reshape(-1), r.detach().reshape(-1)
        for start in range(0, flat_o.numel(), _CHUNK):
            a = flat_o[start : start + _CHUNK].double()
            b = flat_r[start : start + _CHUNK].double()
            diff = (a - b).abs().nan_to_num_(nan=math.inf)
            nan += int(torch.isnan(a).sum())
            bad += int((~_isclose(a, b, rtol=rtol, atol=atol)).sum())
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
            diff_sq += float(diff.square().sum())
            ref_sq += float(b.square().sum())
            del a, b, diff
        rel = math.sqrt(diff_sq) / (math.sqrt(ref_sq) or 1.0)
        worst, worst_rel = max(worst, max_abs), max(worst_rel, rel)
        if bad:
            extra = f", {nan} NaN" if nan else ""
            return Closeness(False, f"output {i}: {bad}/{o.numel()} elements off (max abs err {max_abs:.3g}, "
                                    f"rel L2 {rel:.3g}{extra}; atol {atol:g}, rtol {rtol:g})", max_abs, rel)
    return Closeness(True, f"max abs err {worst:.3g}, rel L2 {worst_rel:.3g}", worst, worst_rel)


def bitwise_equal(a: Any, b: Any) -> bool:
    fa, fb = tensors(a), tensors(b)
    if len(fa) != len(fb) or not fa:
        return False
    for x, y in zip(fa, fb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if not _equal(torch.nan_to_num(x.detach().to(y.device)), torch.nan_to_num(y.detach())):
            return False
    return True


def detached_copy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.Tensor.clone(torch.Tensor.detach(value)) if type(value) is torch.Tensor else value
    if isinstance(value, (tuple, list)):
        return type(value)(detached_copy(v) for v in value)
    return value


@contextlib.contextmanager
def preserved_state(*models: nn.Module) -> Iterator[None]:
    saved = []
    for m in models:
        state = {k: v.detach().clone() for k, v in m.state_dict(keep_vars=True).items() if isinstance(v, torch.Tensor)}
        modes = {name: sub.training for name, sub in m.named_modules()}
        saved.append((m, state, modes))
    try:
        yield
    finally:
        for m, state, modes in saved:
            current = m.state_dict(keep_vars=True)
            with torch.no_grad():
                for k, v in state.items():
                    if k in current and isinstance(current[k], torch.Tensor) and current[k].shape == v.shape:
                        current[k].copy_(v)
            for name, sub in m.named_modules():
                if name in modes:
                    sub.training = modes[name]


def _storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        storage = t.untyped_storage()
        return storage.data_ptr(), storage.data_ptr() + storage.nbytes()
    except Exception:  # noqa: BLE001 — subclasses and odd tensors
        return None


def _overlaps(a: tuple[int, int] | None, b: tuple[int, int] | None) -> bool:
    return a is not None and b is not None and a[0] < b[1] and b[0] < a[1] and a[1] > a[0] and b[1] > b[0]


def has_dropout(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 and m.training for m in model.modules())


def mode_dependent(model: nn.Module) -> list[str]:
    kinds = (nn.modules.batchnorm._NormBase, nn.modules.dropout._DropoutNd)
    return sorted({type(m).__name__ for m in model.modules() if isinstance(m, kinds)})


# ---------------------------------------------------------------------------------------- the checks
def check_output_contract(ctx: VerifyContext) -> list[CheckResult]:
    """output_type, output_aliasing, input_mutation, degenerate_output on one fresh input set."""
    inputs = ctx.make_inputs(ctx.seed())
    ref_in = clone_inputs(inputs)
    before_ref = clone_inputs(ref_in)
    ref_out = run(ctx.ref, ref_in)
    ref_mutates = not all(
        _equal(a, b) for a, b in zip(ref_in, before_ref) if isinstance(a, torch.Tensor)
    )
    cand_in = clone_inputs(inputs)
    pristine = clone_inputs(cand_in)
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
    if bad_types or not_tensor or weird:
        results.append(failed("output_type", "type(out) is not torch.Tensor — " + "; ".join(bad_types + not_tensor + weird)))
    else:
        results.append(passed("output_type", f"{len(tensors(out))} plain torch.Tensor output(s)"))

    # output_aliasing: own storage — not an input's, not a parameter's or buffer's, not the reference's output.
    outs = [o for o in tensors(out) if type(o) is torch.Tensor]
    ref_alias_inputs = any(_overlaps(_storage_span(r), _storage_span(x)) for r in tensors(ref_out)
                           for x in ref_in if isinstance(x, torch.Tensor))
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
    # a second call must not hand back the same storage while the first output is still alive
    out2 = run(ctx.cand, clone_inputs(inputs))
    sync(ctx.device)
    for i, (a, b) in enumerate(zip(outs, [o for o in tensors(out2) if type(o) is torch.Tensor])):
        if _overlaps(_storage_span(a), _storage_span(b)):
            problems.append(f"output {i} of two calls is the same storage (a buffer the candidate keeps and "
                            "rewrites: the first result changes under the caller)")
    if problems:
        results.append(failed("output_aliasing", "; ".join(sorted(set(problems)))))
    else:
        results.append(passed("output_aliasing", "outputs own their storage (no input, parameter, buffer, "
                                                 "reference-output or cross-call aliasing)"))

    # input_mutation: the candidate's inputs are bitwise unchanged (unless the reference mutates its own).
    changed = []
    for j, (x, before, lay) in enumerate(zip(cand_in, pristine, layout)):
        if not isinstance(x, torch.Tensor):
            continue
        now = (x.data_ptr(), tuple(x.shape), x.stride(), x.dtype)
        if now != lay:
            changed.append(f"input {j} was resized/re-pointed ({lay[1]} -> {now[1]})")
        elif not _equal(torch.nan_to_num(x), torch.nan_to_num(before)):
            n = int((x != before).sum())
            changed.append(f"input {j}: {n}/{x.numel()} elements overwritten")
    if changed and not ref_mutates:
        results.append(failed("input_mutation", "; ".join(changed)))
    elif changed:
        results.append(passed("input_mutation", "inputs changed, as the reference's own forward changes them"))
    else:
        results.append(passed("input_mutation", "inputs bitwise unchanged after the call"))

    results.append(_degenerate(out, ref_out, cand_in, ctx))
    return results


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
    if not passing:
        ctx.notes["tight_atol"] = ctx.atol
        return passed("tolerance_sanity", f"zeros, constants and inputs all fail atol {ctx.atol:g}/rtol {ctx.rtol:g}")
    scale = min(m for _, _, m in passing) or 1.0
    tight = min(ctx.atol, 1e-3 * scale)
    ctx.notes["tight_atol"] = tight
    which = ", ".join(f"{label} (output {i})" for i, label, _ in passing)
    return warned("tolerance_sanity", f"{which} would pass atol {ctx.atol:g}/rtol {ctx.rtol:g} on this problem "
                                      f"(mean |ref| {scale:.3g}); verification uses atol {tight:.3g} instead",
                  "incorrect")


def _chunked_sum(t: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> float:
    flat = t.detach().reshape(-1)
    return sum(float(fn(flat[i : i + _CHUNK].double()).sum()) for i in range(0, flat.numel(), _CHUNK))


def _all_close_chunked(value: Any, r: torch.Tensor, atol: float, rtol: float) -> bool:
    """isclose(value, r).all() in float64 chunks; value is a scalar or a tensor of r's shape."""
    flat_r = r.detach().reshape(-1)
    flat_v = value.detach().reshape(-1) if isinstance(value, torch.Tensor) else None
    for i in range(0, flat_r.numel(), _CHUNK):
        rc = flat_r[i : i + _CHUNK].double()
        vc = flat_v[i : i + _CHUNK].double().to(rc.device) if flat_v is not None else torch.full_like(rc, value)
        if not bool(_isclose(vc, rc, rtol=rtol, atol=atol).all()):
            return False
    return True


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """‖a − b‖ / ‖b‖ in float64 chunks."""
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    num = den = 0.0
    for i in range(0, fb.numel(), _CHUNK):
        x = fa[i : i + _CHUNK].double().to(fb.device)
        y = fb[i : i + _CHUNK].double()
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


def check_replay(ctx: VerifyContext) -> list[CheckResult]:
    """Cached or replayed outputs: new data in the same storage, same data in new storage, run twice."""
    a = ctx.make_inputs(ctx.seed())
    b = ctx.make_inputs(ctx.seed())
    ref_a = run(ctx.ref, clone_inputs(a))
    ref_b = run(ctx.ref, clone_inputs(b))
    refs_differ = not bitwise_equal(ref_a, ref_b)
    cand_a_inputs = clone_inputs(a)
    out_a = detached_copy(run(ctx.cand, cand_a_inputs))
    out_a_twice = detached_copy(run(ctx.cand, clone_inputs(a)))
    # same storage, new contents (pointer-keyed caches, stale CUDA graphs)
    for x, y in zip(cand_a_inputs, b):
        if isinstance(x, torch.Tensor) and x.shape == y.shape:
            x.copy_(y)
    out_b_same_ptr = detached_copy(run(ctx.cand, cand_a_inputs))
    out_b_new = detached_copy(run(ctx.cand, clone_inputs(b)))
    sync(ctx.device)
    replays, wrong = [], []
    if refs_differ:
        if bitwise_equal(out_b_same_ptr, out_a):
            replays.append("new inputs written into the same tensors gave back the previous output (cache keyed "
                           "by pointer/shape, or a replayed graph)")
        if bitwise_equal(out_b_new, out_a):
            replays.append("new inputs in new tensors gave back the previous output (output does not depend on "
                           "the inputs: precomputed or cached by shape)")
    for label, out in (("same storage", out_b_same_ptr), ("new storage", out_b_new)):
        c = compare(out, ref_b, ctx.atol, ctx.rtol)
        if not c.ok:
            wrong.append(f"{label}: {c.message}")
    results: list[CheckResult] = []
    if replays:
        results.append(failed("replay_cache", "; ".join(replays)))
    elif wrong:
        results.append(failed("replay_cache", "wrong on fresh inputs after an earlier call — " + "; ".join(wrong),
                              "incorrect"))
    else:
        results.append(passed("replay_cache", "fresh inputs (same storage and new storage) give fresh, correct "
                                              "outputs"))
    if has_dropout(ctx.ref):
        results.append(skipped("determinism", "the model has active dropout", "incorrect"))
    else:
        c = compare(out_a_twice, out_a, ctx.atol, ctx.rtol)
        if c.ok:
            results.append(passed("determinism", f"same inputs twice agree ({c.message})", "incorrect"))
        else:
            results.append(failed("determinism", f"same inputs twice disagree: {c.message}", "incorrect"))
    return results


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


def _perturbed(inputs: Inputs, rng: random.Random) -> Inputs:
    out = clone_inputs(inputs)
    for x in out:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 0:
            flat = x.view(-1) if x.is_contiguous() else None
            if flat is None:
                continue
            n = flat.numel()
            count = max(1, n // 100)
            start = rng.randrange(0, max(1, n - count))
            lo, hi = float(x.min()), float(x.max())
            if hi <= lo:
                hi = lo + 1.0
            gen = torch.Generator(device="cpu").manual_seed(rng.randrange(2**31))
            fresh = torch.rand(count, generator=gen, dtype=torch.float64) * (hi - lo) + lo
            flat[start : start + count] = fresh.to(flat.dtype).to(flat.device)
    return out


def check_input_sensitivity(ctx: VerifyContext) -> CheckResult:
    """Change ~1% of every input in one random block: outputs must follow (catches subsampling and caches
    keyed on a sample of the data)."""
    base = ctx.make_inputs(ctx.seed())
    out_base = detached_copy(run(ctx.cand, clone_inputs(base)))
    problems = []
    for trial in range(2):
        pert = _perturbed(base, ctx.rng)
        ref_p = run(ctx.ref, clone_inputs(pert))
        out_p = run(ctx.cand, clone_inputs(pert))
        ref_base = run(ctx.ref, clone_inputs(base))
        if bitwise_equal(out_p, out_base) and not bitwise_equal(ref_p, ref_base):
            return failed("input_sensitivity", f"perturbing 1% of the inputs (trial {trial}) left the output "
                          "bitwise unchanged while the reference's changed: cached or never read")
        c = compare(out_p, ref_p, ctx.atol, ctx.rtol)
        if not c.ok:
            problems.append(f"trial {trial}: {c.message}")
    if problems:
        return failed("input_sensitivity", "wrong after perturbing 1% of the inputs (skipped or partial work) — "
                      + "; ".join(problems), "incorrect")
    return passed("input_sensitivity", "outputs follow a 1% perturbation of the inputs", "incorrect")


def check_input_distribution(ctx: VerifyContext) -> CheckResult:
    """The same shapes from other distributions (standard normal ×1 and ×4): skipped work that only
    passes because the benchmark's inputs make the problem near-degenerate (e.g. uniform attention)."""
    base = ctx.make_inputs(ctx.seed())
    results = []
    for scale in (1.0, 4.0):
        gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed())
        variant = [
            (torch.randn(x.shape, generator=gen, dtype=torch.float32, device=ctx.device) * scale).to(x.dtype)
            .to(x.device) if isinstance(x, torch.Tensor) and x.is_floating_point() else x
            for x in base
        ]
        try:
            ref_out = run(ctx.ref, clone_inputs(variant))
        except Exception as exc:  # noqa: BLE001 — the reference does not accept this distribution
            results.append(f"randn×{scale:g}: reference raised {type(exc).__name__}, skipped")
            continue
        if any(not bool(torch.isfinite(t).all()) for t in tensors(ref_out) if t.is_floating_point()):
            results.append(f"randn×{scale:g}: reference not finite, skipped")
            continue
        try:
            out = run(ctx.cand, clone_inputs(variant))
        except Exception as exc:  # noqa: BLE001
            return failed("input_distribution", f"randn×{scale:g} inputs: candidate raised "
                          f"{type(exc).__name__}: {str(exc)[:200]}", "incorrect")
        c = compare(out, ref_out, ctx.atol, ctx.rtol)
        if not c.ok:
            return failed("input_distribution", f"correct on get_inputs()'s distribution but wrong on randn×{scale:g} "
                          f"inputs of the same shapes (skipped/specialised work): {c.message}", "incorrect")
        results.append(f"randn×{scale:g}: {c.message}")
    return passed("input_distribution", "; ".join(results), "incorrect")


def _shape_variants(inputs: Inputs) -> list[tuple[str, dict[int, int]]]:
    """Size substitutions: each distinct dimension size (batch first) replaced everywhere by an odd,
    smaller size. The reference decides which are valid."""
    sizes: list[int] = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            for s in x.shape:
                if s > 2 and s not in sizes:
                    sizes.append(s)
    variants = []
    for s in sizes[:4]:
        new = max(2, (s * 3) // 4 + 1) if s > 3 else s - 1
        if new == s:
            new = s - 1
        variants.append((f"{s}->{new}", {s: new}))
    return variants


def _resize_inputs(inputs: Inputs, mapping: dict[int, int], gen: torch.Generator) -> Inputs:
    out = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            shape = [mapping.get(s, s) for s in x.shape]
            out.append(torch.rand(shape, generator=gen, dtype=torch.float32, device=gen.device).to(x.dtype).to(x.device))
        elif isinstance(x, torch.Tensor):
            shape = [mapping.get(s, s) for s in x.shape]
            lo, hi = (int(x.min()), int(x.max()) + 1) if x.numel() else (0, 2)
            out.append(torch.randint(lo, max(hi, lo + 1), shape, generator=gen, device=gen.device).to(x.dtype)
                       .to(x.device))
        else:
            out.append(x)
    return out


def check_extra_shapes(ctx: VerifyContext, max_elements: int = 1 << 28) -> CheckResult:
    base = ctx.make_inputs(ctx.seed())
    tried = []
    for label, mapping in _shape_variants(base):
        gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed())
        variant = _resize_inputs(base, mapping, gen)
        if sum(x.numel() for x in variant if isinstance(x, torch.Tensor)) > max_elements:
            continue
        try:
            with preserved_state(ctx.ref):
                ref_out = run(ctx.ref, clone_inputs(variant))
        except Exception:  # noqa: BLE001 — this size is fixed by the model (weights): not a free dimension
            continue
        try:
            with preserved_state(ctx.cand):
                out = run(ctx.cand, clone_inputs(variant))
        except Exception as exc:  # noqa: BLE001
            tried.append(f"{label}: candidate raised {type(exc).__name__} (specialised, but not wrong)")
            continue
        c = compare(out, ref_out, ctx.atol, ctx.rtol)
        if not c.ok:
            return failed("extra_shapes", f"sizes {label} (the reference accepts them): {c.message} — code "
                          "specialised to the benchmark's shapes", "incorrect")
        tried.append(f"{label}: ok")
    if not tried:
        return skipped("extra_shapes", "no dimension of the inputs can change (the reference rejects every variant)",
                       "incorrect")
    if any("raised" in t for t in tried):
        return warned("extra_shapes", "; ".join(tried), "incorrect")
    return passed("extra_shapes", "; ".join(tried), "incorrect")


def check_timed_outputs(ctx: VerifyContext, pool_size: int = 4, iters: int = 24) -> CheckResult:
    """A timing-like loop (warm-up, rotating pool of fresh inputs, events and L2 writes on CUDA), every
    output kept and compared afterwards: a candidate that behaves differently once it is being timed."""
    pool = [ctx.make_inputs(ctx.seed()) for _ in range(pool_size)]
    refs = [detached_copy(run(ctx.ref, clone_inputs(p))) for p in pool]
    cand_pool = [clone_inputs(p) for p in pool]
    flush = None
    events = None
    if ctx.device.type == "cuda":
        flush = torch.empty(64 << 20, dtype=torch.uint8, device=ctx.device)
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    bad = []
    for i in range(iters):
        k = i % pool_size
        if flush is not None and events is not None:
            flush.zero_()
            events[0].record()
            out = run(ctx.cand, cand_pool[k])
            events[1].record()
            events[1].synchronize()
        else:
            out = run(ctx.cand, cand_pool[k])
        sync(ctx.device)
        c = compare(out, refs[k], ctx.atol, ctx.rtol)  # outside the timed span, before the next call
        del out
        if not c.ok:
            bad.append((i, c.message))
    if bad:
        first_bad, message = bad[0]
        cheat = ctx.notes.get("trials_passed", True)
        return failed("timed_outputs", f"{len(bad)}/{iters} outputs of the timing-like loop are wrong, first at "
                      f"iteration {first_bad}: {message}"
                      + (" — correct while checked, wrong once called repeatedly" if cheat else ""),
                      "cheating" if cheat else "incorrect")
    return passed("timed_outputs", f"{iters} outputs of a timing-like loop over {pool_size} rotating input sets "
                                   "all correct")


def _condemned(ctx: VerifyContext) -> frozenset[str]:
    return frozenset().union(*(CONDEMNING.get(f, frozenset({f})) for f in ctx.ref_families))


def _cuda_code(ctx: VerifyContext) -> bool:
    return bool(ctx.scan.kernel_names) or any(load.has_cuda for load in ctx.extensions.loads)


def _declared_baseline(ctx: VerifyContext) -> bool:
    """A pure-PyTorch candidate may say it is a baseline (module-level ``KFORGE_BASELINE = True``), as the
    identity candidates that validate the timing do. Running the reference's own operator is then its
    stated purpose, disclosed in the result, not a shortcut passed off as a custom kernel; a candidate that
    compiles any custom code cannot claim it."""
    module = sys.modules.get(type(ctx.cand).__module__)
    return (getattr(module, "KFORGE_BASELINE", False) is True and not _cuda_code(ctx)
            and not ctx.extensions.loads)


def check_ops(ctx: VerifyContext) -> list[CheckResult]:
    """banned_ops + custom_kernel_used + silent_fallback from one instrumented forward on real inputs."""
    inputs = ctx.make_inputs(ctx.seed())
    calls_before = ctx.extensions.total_calls()
    raised_before = sum(ctx.extensions.raised.values())
    recorder = OpRecorder()
    with recorder:
        out = run(ctx.cand, clone_inputs(inputs))
    sync(ctx.device)
    del out
    ext_calls = ctx.extensions.total_calls() - calls_before
    ext_raised = sum(ctx.extensions.raised.values()) - raised_before
    custom_ops = recorder.custom_ops()
    condemned = _condemned(ctx)
    by_family: dict[str, list[str]] = {}
    for op, n in recorder.ops.items():
        fam = aten_family(op) if op.startswith("aten::") else None
        if fam:
            by_family.setdefault(fam, []).append(f"{op}×{n}")
    ctx.notes["ops"] = dict(recorder.ops)
    device_is_real = ctx.device.type == "cuda" or not _cuda_code(ctx)
    results: list[CheckResult] = []
    hits = sorted(x for fam in condemned for x in by_family.get(fam, []))
    soft = sorted(x for fam, xs in by_family.items() if fam not in condemned for x in xs)
    families = ", ".join(sorted(ctx.ref_families)) or "none"
    if hits and _declared_baseline(ctx):
        results.append(warned("banned_ops", f"declared PyTorch baseline (KFORGE_BASELINE = True): executed "
                              f"{', '.join(hits)}, the reference's own operator ({families}) — a timing "
                              "baseline, not a custom kernel"))
    elif hits and device_is_real:
        results.append(failed("banned_ops", f"the candidate's forward executed {', '.join(hits)} — the very "
                              f"operator ({families}) it should replace, on the problem's own inputs"))
    elif hits:
        results.append(skipped("banned_ops", f"{', '.join(hits)} ran, but on a {ctx.device.type} host where the "
                               "candidate's CUDA kernels cannot run (its fallback); decided on the GPU"))
    elif soft:
        results.append(warned("banned_ops", f"PyTorch {', '.join(soft)} inside the forward (reference families: "
                              f"{families}); not the replaced operator itself"))
    else:
        results.append(passed("banned_ops", f"no PyTorch {families} op executed in the forward"))

    loads_ok = [x for x in ctx.extensions.loads if x.ok]
    loads_failed = [x for x in ctx.extensions.loads if not x.ok]
    cuda_impossible = ctx.device.type != "cuda" and not torch.cuda.is_available()
    unexpected_failures = [x for x in loads_failed if not (x.has_cuda and cuda_impossible)]
    if unexpected_failures or ext_raised:
        what = "; ".join(f"build {x.name} failed ({x.error})" for x in unexpected_failures)
        if ext_raised:
            what = (what + "; " if what else "") + f"{ext_raised} extension call(s) raised"
        results.append(failed("silent_fallback", f"{what} — and the candidate returned an output anyway (try/except "
                              "fallback instead of an error)"))
    elif loads_failed:
        results.append(skipped("silent_fallback", "CUDA extension builds cannot succeed on this host; decided on "
                               "the GPU"))
    else:
        results.append(passed("silent_fallback", "no extension build or call failed"))

    if not ctx.extensions.loads and not ctx.scan.kernel_names and not custom_ops:
        results.append(skipped("custom_kernel_used", "the candidate compiles no extension (pure PyTorch)"))
    elif ext_calls or custom_ops:
        detail = ", ".join(f"{k}×{v}" for k, v in ctx.extensions.calls.items()) or ", ".join(custom_ops)
        results.append(passed("custom_kernel_used", f"the forward called its compiled code: {detail}"))
    elif not loads_ok and (loads_failed or ctx.scan.kernel_names) and cuda_impossible:
        results.append(skipped("custom_kernel_used", "the extension is CUDA-only and this host has no GPU"))
    else:
        names = ", ".join(sorted(x.name for x in loads_ok)) or ", ".join(sorted(ctx.scan.kernel_names))
        results.append(failed("custom_kernel_used", f"custom code ({names}) is compiled but the forward never "
                              "called it on the problem's inputs"))
    return results


def check_cuda_profile(ctx: VerifyContext) -> list[CheckResult]:
    """CUDA only: kernels the forward launched (did the candidate's own kernels run?) and the streams they ran
    on (work on a side stream escapes the caller's stream, its events and its ordering)."""
    if ctx.device.type != "cuda":
        return [skipped("side_stream", "needs CUDA"), skipped("kernel_launch", "needs CUDA")]
    from torch.profiler import ProfilerActivity, profile

    inputs = ctx.make_inputs(ctx.seed())
    run(ctx.cand, clone_inputs(inputs))
    sync(ctx.device)
    cand_inputs = clone_inputs(inputs)
    marker = torch.zeros(1, device=ctx.device)
    sync(ctx.device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        marker.add_(1)  # first kernel of the trace, on the caller's current stream
        out = run(ctx.cand, cand_inputs)
        torch.cuda.synchronize(ctx.device)
    del out
    kernels, side = _profile_kernels(prof)
    ctx.notes["kernels"] = kernels[:40]
    results = []
    # The profiler's own op record (a second witness beside the dispatch-mode one in check_ops).
    condemned = _condemned(ctx)
    try:
        ops = sorted({e.name for e in prof.events() if str(getattr(e, "name", "")).startswith("aten::")
                      and aten_family(e.name) in condemned})
    except Exception:  # noqa: BLE001 — an older profiler API: the dispatch record in check_ops stands
        ops = []
    if ops and not _declared_baseline(ctx):
        results.append(failed("banned_ops", f"the profiler saw {', '.join(ops[:4])} — the very operator "
                              f"({', '.join(sorted(ctx.ref_families))}) the candidate should replace — in its forward"))
    if side:
        results.append(failed("side_stream", f"kernels ran on stream(s) other than the caller's current stream: {side}"))
    elif kernels:
        results.append(passed("side_stream", f"all {len(kernels)} kernel(s) ran on the caller's current stream"))
    else:
        results.append(warned("side_stream", "the profiler recorded no kernels"))
    names = sorted(ctx.scan.kernel_names)
    if names:
        custom = sorted({k for k in kernels if any(n in k for n in names)})
        if custom:
            results.append(passed("kernel_launch", f"custom kernels launched on the problem's inputs: {', '.join(custom[:6])}"))
        else:
            shown = ", ".join(k[:60] for k in kernels[:6]) or "none"
            results.append(failed("kernel_launch", f"none of the candidate's __global__ kernels ({', '.join(names[:6])}) "
                                  f"was launched on the problem's inputs; kernels seen: {shown}"))
    else:
        results.append(skipped("kernel_launch", "the candidate defines no __global__ kernel"))
    return results


def _profile_kernels(prof: Any) -> tuple[list[str], str]:
    """(kernel names in launch order, description of kernels on streams other than the marker's)."""
    import json
    import os
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    except Exception:  # noqa: BLE001 — no trace, no claim
        return [], ""
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    events = sorted((ev for ev in trace.get("traceEvents", []) if ev.get("cat") == "kernel"),
                    key=lambda ev: ev.get("ts", 0))
    if not events:
        return [], ""
    main = events[0].get("args", {}).get("stream")
    names = [ev.get("name", "?") for ev in events[1:]]
    others: dict[Any, set[str]] = {}
    for ev in events[1:]:
        stream = ev.get("args", {}).get("stream")
        if stream != main:
            others.setdefault(stream, set()).add(ev.get("name", "?")[:60])
    side = "; ".join(f"stream {s}: {', '.join(sorted(n)[:3])}" for s, n in others.items())
    return names, side


def check_timing_cross(ctx: VerifyContext, iters: int = 10) -> CheckResult:
    """CUDA only: event time on the current stream vs host wall clock until the whole device is idle, for
    the candidate and — interleaved, as the baseline under the same conditions (other processes on the GPU,
    launch overhead) — the reference. Work that escapes the events (side streams, host threads, deferred
    launches) shows as a gap far larger than the reference's."""
    if ctx.device.type != "cuda":
        return skipped("timing_cross_check", "needs CUDA")
    inputs = ctx.make_inputs(ctx.seed())
    ref_in, cand_in = clone_inputs(inputs), clone_inputs(inputs)
    run(ctx.ref, ref_in)
    run(ctx.cand, cand_in)
    torch.cuda.synchronize(ctx.device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def measure(model: nn.Module, args: Inputs) -> tuple[float, float]:
        torch.cuda.synchronize(ctx.device)
        t0 = time.perf_counter()
        start.record()
        run(model, args)
        end.record()
        end.synchronize()
        torch.cuda.synchronize(ctx.device)
        wall = (time.perf_counter() - t0) * 1e3
        return start.elapsed_time(end), wall

    samples: dict[str, list[tuple[float, float]]] = {"ref": [], "cand": []}
    for _ in range(iters):
        samples["ref"].append(measure(ctx.ref, ref_in))
        samples["cand"].append(measure(ctx.cand, cand_in))

    def med(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    ev, wall = med([e for e, _ in samples["cand"]]), med([w for _, w in samples["cand"]])
    gap = med([w - e for e, w in samples["cand"]])
    ref_gap = med([w - e for e, w in samples["ref"]])
    ctx.notes["event_ms"], ctx.notes["wall_ms"] = ev, wall
    if gap > max(0.3 * wall, 0.2) and gap > 3 * ref_gap + 0.1:
        return failed("timing_cross_check", f"median CUDA-event time {ev:.3f} ms but {wall:.3f} ms until the device "
                      f"is idle (gap {gap:.3f} ms; the reference's gap {ref_gap:.3f} ms): the work escapes the timed "
                      "stream (side stream, thread or deferred launch)")
    return passed("timing_cross_check", f"event {ev:.3f} ms vs device-synchronised wall clock {wall:.3f} ms "
                                        f"(gap {gap:.3f} ms; reference's gap {ref_gap:.3f} ms)")


def check_precision(ctx: VerifyContext) -> CheckResult:
    """Candidate's error against float64 vs PyTorch's own error: lower precision than the dtype allows."""
    inputs = ctx.make_inputs(ctx.seed())
    if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs):
        return skipped("precision", "no floating-point inputs", "incorrect")
    ref_out = run(ctx.ref, clone_inputs(inputs))
    out = run(ctx.cand, clone_inputs(inputs))
    try:
        ref64_model = _float64_copy(ctx.ref)
    except Exception as exc:  # noqa: BLE001
        return skipped("precision", f"no float64 copy of the reference ({type(exc).__name__})", "incorrect")
    with preserved_state(ref64_model):
        ref64 = run(ref64_model, [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                  for x in clone_inputs(inputs)])
    tf32 = bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
    lines = []
    for i, (o, r, r64) in enumerate(zip(tensors(out), tensors(ref_out), tensors(ref64))):
        if not r.is_floating_point() or o.shape != r.shape:
            continue
        cand_err = _rel_err(o, r64)
        ref_err = _rel_err(r, r64)
        floor = {torch.float32: 3e-3 if tf32 else 5e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2,
                 torch.float64: 1e-12}.get(r.dtype, 1e-3)
        lines.append(f"output {i} ({str(r.dtype).replace('torch.', '')}): rel L2 vs fp64 {cand_err:.3g}, "
                     f"PyTorch's own {ref_err:.3g}")
        if not math.isfinite(cand_err) or (cand_err > 10 * ref_err and cand_err > floor):
            return failed("precision", f"{lines[-1]} — over 10× PyTorch's error and above {floor:g} for this dtype"
                          f"{' (TF32 allowed)' if tf32 else ' (TF32 off)'}: computed in lower precision",
                          "incorrect")
    return passed("precision", "; ".join(lines) or "no floating outputs", "incorrect")


def _float64_copy(model: nn.Module) -> nn.Module:
    import copy

    clone = copy.deepcopy(model)
    return clone.double()


# ---------------------------------------------------------------------------------------- state semantics
def check_state(ctx: VerifyContext) -> list[CheckResult]:
    results: list[CheckResult] = []
    ref_keys = set(ctx.ref.state_dict().keys())
    cand_keys = set(ctx.cand.state_dict().keys())
    same_keys = ref_keys == cand_keys and bool(ref_keys)
    dependent = mode_dependent(ctx.ref)

    # train/eval
    if dependent:
        bad = []
        with preserved_state(ctx.ref, ctx.cand):
            for mode in ("eval", "train"):
                getattr(ctx.ref, mode)()
                getattr(ctx.cand, mode)()
                if mode == "train" and has_dropout(ctx.ref):
                    continue
                inputs = ctx.make_inputs(ctx.seed())
                c = compare(run(ctx.cand, clone_inputs(inputs)), run(ctx.ref, clone_inputs(inputs)), ctx.atol, ctx.rtol)
                if not c.ok:
                    bad.append(f"{mode} mode: {c.message}")
        if bad:
            results.append(failed("state_train_eval", "; ".join(bad) + f" (mode-dependent layers: {', '.join(dependent)})",
                                  "incorrect"))
        else:
            results.append(passed("state_train_eval", f"train and eval mode both match ({', '.join(dependent)})",
                                  "incorrect"))
    else:
        results.append(skipped("state_train_eval", "no mode-dependent layers", "incorrect"))

    # load_state_dict with fresh random parameters
    if not same_keys:
        results.append(skipped("state_reload", "state_dict keys differ from the reference's: parameters cannot be "
                               "swapped", "incorrect"))
    else:
        with preserved_state(ctx.ref, ctx.cand):
            gen = torch.Generator(device="cpu").manual_seed(ctx.seed())
            fresh = {}
            for k, v in ctx.ref.state_dict().items():
                if v.is_floating_point():
                    noise = torch.randn(v.shape, generator=gen, dtype=torch.float32)
                    scale = float(v.float().std()) if v.numel() > 1 and float(v.float().std()) > 0 else 0.5
                    mean = float(v.float().mean()) if v.numel() else 0.0
                    if "running_var" in k or k.endswith(".var"):
                        value = (noise.abs() * 0.5 + 0.5)
                    else:
                        value = noise * scale + mean + (0.3 if v.numel() == 1 else 0.0)
                    fresh[k] = value.to(v.dtype).to(v.device)
                else:
                    fresh[k] = v.clone()
            try:
                ctx.ref.load_state_dict(fresh)
                ctx.cand.load_state_dict(fresh)
            except Exception as exc:  # noqa: BLE001
                results.append(failed("state_reload", f"load_state_dict failed: {type(exc).__name__}: {exc}"[:300],
                                      "incorrect"))
            else:
                bad = []
                modes = ("train", "eval") if dependent else ("current",)
                for mode in modes:
                    if mode != "current":
                        ctx.ref.train(mode == "train")
                        ctx.cand.train(mode == "train")
                    if mode == "train" and has_dropout(ctx.ref):
                        continue
                    inputs = ctx.make_inputs(ctx.seed())
                    c = compare(run(ctx.cand, clone_inputs(inputs)), run(ctx.ref, clone_inputs(inputs)),
                                ctx.atol, ctx.rtol)
                    if not c.ok:
                        bad.append(f"{mode}: {c.message}")
                if bad:
                    results.append(failed("state_reload", "after load_state_dict with fresh random parameters the "
                                          "output is wrong (parameters folded or cached at __init__): " + "; ".join(bad),
                                          "incorrect"))
                else:
                    results.append(passed("state_reload", "matches after load_state_dict with fresh random parameters",
                                          "incorrect"))

    # buffers after a sequence of training-mode calls
    buffers = [k for k, _ in ctx.ref.named_buffers()]
    if not buffers or not same_keys:
        results.append(skipped("state_buffers", "no buffers" if not buffers else "state_dict keys differ",
                               "incorrect"))
    else:
        with preserved_state(ctx.ref, ctx.cand):
            ctx.cand.load_state_dict(ctx.ref.state_dict())
            ctx.ref.train()
            ctx.cand.train()
            for _ in range(3):
                inputs = ctx.make_inputs(ctx.seed())
                run(ctx.ref, clone_inputs(inputs))
                run(ctx.cand, clone_inputs(inputs))
            ref_state = dict(ctx.ref.named_buffers())
            cand_state = dict(ctx.cand.named_buffers())
            bad = []
            for k in buffers:
                r, c = ref_state[k], cand_state.get(k)
                if c is None:
                    bad.append(f"{k} missing")
                    continue
                if r.is_floating_point():
                    if not torch.allclose(c.double().to(r.device), r.double(), atol=1e-5, rtol=1e-4):
                        bad.append(f"{k}: max diff {float((c.double().to(r.device) - r.double()).abs().max()):.3g}")
                elif not _equal(c.to(r.device), r):
                    bad.append(f"{k}: {c.tolist() if c.numel() == 1 else '...'} vs {r.tolist() if r.numel() == 1 else '...'}")
        if bad:
            results.append(failed("state_buffers", "after 3 training-mode calls: " + "; ".join(bad[:4]), "incorrect"))
        else:
            results.append(passed("state_buffers", f"{len(buffers)} buffer(s) match after 3 training-mode calls",
                                  "incorrect"))
    return results


# ---------------------------------------------------------------------------------------- harness state
def check_integrity(ctx: VerifyContext, stage: str) -> list[CheckResult]:
    results = []
    if ctx.snapshot is not None:
        changes = ctx.snapshot.diff()
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
