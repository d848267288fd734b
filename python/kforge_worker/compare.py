"""Output comparison: the KernelBench pass mark plus error measures against a float64 reference.

Pass mark (KernelBench-compatible): same shape and dtype, ``torch.allclose(out, ref, atol, rtol)`` (integer and bool
outputs exactly equal: no rounding for a tolerance to absorb), and
never a NaN/Inf in the candidate where the reference is finite (allclose alone would accept inf == inf); where
the reference itself is NaN or infinite by its own definition, the same value matches it (allclose would reject
NaN == NaN, and every honest answer with it). With a float64 evaluation, an element outside that band still
passes when the candidate is no further from float64 there than twice the reference is at its worst element
(AS_ACCURATE_MULTIPLE), plus the same band: the reference's own rounding (a TF32 convolution, another summation
order) is not charged to the candidate. Two TF32 convolutions by different cuDNN algorithms differ by more than
1e-4 at tens of a hundred million outputs while equally accurate; a candidate that is systematically less
precise is the precision check's to catch (rel L2 vs float64). The error measures — max
absolute error and relative L2 error — are reported for candidate vs reference, candidate vs float64
and reference vs float64, so "is it as accurate as PyTorch?" can be answered, not only "does it pass".

Everything is computed in chunks: the attention problem's output has half a billion elements, and
float64 temporaries of that size would cost gigabytes each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

# Elements compared at a time, at least. A chunk's float64 copies and the comparison's temporaries (five or six of
# them) live together: at 16M elements that was ~0.7 GB beside the problem, more than a 128 MB problem's own tensors;
# at 1M it is ~50 MB. See chunk_elements for larger tensors.
CHUNK = 1 << 20
CHUNKS_AT_MOST = 64


def chunk_elements(numel: int) -> int:
    """Elements per step for a pass over ``numel`` elements: CHUNK, or 1/CHUNKS_AT_MOST of them when that is more.
    Each step costs a few kernel launches and host reads: a billion-element output in 1M steps was a thousand of
    them per comparison (seconds on a GPU, where the arithmetic takes milliseconds), and a timing loop compares
    dozens of such outputs. A 64th keeps the step's float64 temporaries under a fifth of a float32 output's size."""
    return max(CHUNK, -(-numel // CHUNKS_AT_MOST))
DEFAULT_TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 1e-2}
FP32_TOLERANCE = 1e-4
PRECISION_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


# The reference's own worst error against float64 seen in this process's correctness trials: comparisons
# made without a float64 evaluation (the checks, the timed spot checks) allow a candidate to differ from the
# reference by NOISE_MULTIPLE times that plus the band. By the triangle inequality two sides each within the
# trials' worst error differ by at most twice it; but on fresh inputs each side's worst error is a new sample
# of a maximum over millions of elements, which the few trials' maximum underestimates: each side gets 2x.
_reference_noise = 0.0
NOISE_MULTIPLE = 4.0


# With a float64 evaluation, an element is as accurate as the reference when its error is within this multiple of
# the reference's worst error (plus the band). Each side's worst error is a sample of a maximum over the same
# elements: a candidate exactly as accurate exceeds the reference's worst about half the time, which the band
# hides only where the reference's error is below it. A deep network in training mode (BatchNorm on batch
# statistics, 50 layers) is ~3e-2 from float64 in PyTorch itself, and an equally accurate candidate (3.3e-2 at
# its worst) failed at 1 element of 10,000. A candidate systematically less precise is the precision check's.
AS_ACCURATE_MULTIPLE = 2.0


def note_reference_noise(worst: float) -> None:
    global _reference_noise
    if math.isfinite(worst):
        _reference_noise = max(_reference_noise, worst)


def reference_noise() -> float:
    return _reference_noise


def set_reference_noise(value: float) -> None:
    """Sets the allowance exactly: the pipeline computes it from the trials itself and puts it back here if
    anything else changed it (the candidate runs in this process: one module attribute write would make every
    comparison without float64 pass)."""
    global _reference_noise
    _reference_noise = float(value) if math.isfinite(value) else 0.0


def within_reference_noise(x: torch.Tensor, y: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Where candidate x differs from reference y by no more than NOISE_MULTIPLE times the reference's own worst
    error (seen in the trials) plus the band: the rule of comparisons made without a float64 evaluation."""
    x, y = x.double(), y.double()
    return (x - y).abs() <= NOISE_MULTIPLE * _reference_noise + atol + rtol * y.abs()


def agreed_non_finite(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Where x holds the same non-finite value as y (NaN and NaN, or the same infinity): a reference that is
    NaN by its own definition (log of a negative input) is matched, not missed, by a candidate that is too.
    Elsewhere a non-finite candidate value is never close."""
    if not (x.is_floating_point() and y.is_floating_point()):
        return torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    return (x.isnan() & y.isnan()) | (x.isinf() & (x == y))


def without_agreed_non_finite(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x and y with the elements where they agree on a non-finite value set to 0 in both (for error measures)."""
    agreed = agreed_non_finite(x, y)
    if not bool(agreed.any()):
        return x, y
    return x.masked_fill(agreed, 0), y.masked_fill(agreed, 0)


class OutputStructureError(Exception):
    """Candidate and reference outputs differ in count or kind (a shape_mismatch)."""


def flatten_outputs(value: Any, where: str = "output") -> list[torch.Tensor]:
    """A forward's result as a flat list of tensors: tuples/lists element by element, scalars as 0-d."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        out: list[torch.Tensor] = []
        for item in value:
            out.extend(flatten_outputs(item, where))
        return out
    if isinstance(value, (bool, int, float)):
        return [torch.as_tensor(value)]
    raise OutputStructureError(f"{where} contains a {type(value).__name__}, not a tensor")


def default_tolerance(dtypes: list[torch.dtype]) -> float:
    """1e-2 when any floating tensor involved is half precision, else 1e-4 (KernelBench's marks)."""
    return max((DEFAULT_TOLERANCE.get(d, FP32_TOLERANCE) for d in dtypes if d.is_floating_point), default=FP32_TOLERANCE)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass
class ErrorStats:
    max_abs: float | None
    rel_l2: float | None
    worst_index: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"maxAbs": _finite(self.max_abs), "relL2": _finite(self.rel_l2)}


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


NO_STATS = ErrorStats(None, None)


def error_stats(out: torch.Tensor, ref: torch.Tensor) -> ErrorStats:
    """max |out - ref| and ‖out - ref‖₂ / ‖ref‖₂ in float64; NaN when a NaN is involved."""
    if out.shape != ref.shape:
        return NO_STATS
    a, b = out.detach().reshape(-1), ref.detach().reshape(-1)
    n = a.numel()
    if n == 0:
        return ErrorStats(0.0, 0.0)
    max_abs, worst, diff_sq, ref_sq = -1.0, 0, 0.0, 0.0
    step = chunk_elements(n)
    for start in range(0, n, step):
        x = a[start : start + step].to(torch.float64)
        y = b[start : start + step].to(b.device, torch.float64)
        x, y = without_agreed_non_finite(x.to(y.device), y)
        d = (x - y).abs_()
        if d.isnan().any():
            chunk_max, chunk_arg = math.nan, int(d.isnan().nonzero()[0].item())
        else:
            chunk_arg = int(d.argmax().item())
            chunk_max = float(d[chunk_arg].item())
        if math.isnan(chunk_max) or chunk_max > max_abs:
            if not math.isnan(max_abs):
                max_abs, worst = chunk_max, start + chunk_arg
        diff_sq += float(d.square_().sum().item())
        ref_sq += float(y.square().sum().item())  # y may alias ref64: no in-place
        del x, y, d
    if ref_sq > 0:
        rel = math.sqrt(diff_sq) / math.sqrt(ref_sq)
    else:
        rel = 0.0 if diff_sq == 0 else math.inf
    return ErrorStats(max_abs, rel, worst)


def count_not_close(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
                    ref64: torch.Tensor | None = None, rows: tuple[int, int] | None = None) -> tuple[int, int]:
    """(elements failing torch.isclose — the allclose criterion, NaN never close — and, given the float64
    evaluation, also further from it than AS_ACCURATE_MULTIPLE times the reference's worst element is, plus the
    same band; non-finite in out). ``rows``: ref64 covers only these leading rows (a sampled float64 evaluation,
    checks/float64.py); outside them an element is as accurate when within (AS_ACCURATE_MULTIPLE + 1) times the
    reference's worst error of the reference there, plus the band (the triangle inequality through the float64
    value the rows do not have)."""
    a, b = out.detach().reshape(-1), ref.detach().reshape(-1)
    lo, hi = _flat_span(out, rows)
    c = ref64.detach().reshape(-1) if ref64 is not None and ref64.numel() == hi - lo else None
    non_finite = 0
    far_chunks: list[tuple[int, torch.Tensor]] = []
    step = chunk_elements(a.numel())
    for start in range(0, a.numel(), step):
        x, y = a[start : start + step], b[start : start + step]
        agreed = agreed_non_finite(x, y.to(x.device))
        if x.is_floating_point() or x.is_complex():
            non_finite += int((~torch.isfinite(x) & ~agreed).sum().item())
        if x.is_floating_point() or x.is_complex():
            far = ~torch.isclose(x, y, rtol=rtol, atol=atol) & ~agreed
        else:
            # Integers and bools are exact: no rounding for a tolerance to absorb. The relative band let an int64 count
            # near 100,000 be off by 10 (red team round 15, adv_counts_partial: counts over all but the last 8 columns
            # passed every trial); the checks' own comparison (checks.context.compare) was already exact.
            far = x != y.to(x.device)
        if bool(far.any()):
            far_chunks.append((start, far))
    if not far_chunks or not a.is_floating_point() or (c is None and _reference_noise == 0.0):
        return sum(int(far.sum().item()) for _, far in far_chunks), non_finite
    if c is None:
        bad = 0
        for start, far in far_chunks:
            within = within_reference_noise(a[start : start + step], b[start : start + step], atol, rtol)
            bad += int((far & ~within).sum().item())
        return bad, non_finite
    ref_worst = reference_worst_error(b[lo:hi], c)
    bad = 0
    for start, far in far_chunks:
        x = a[start : start + step].double()
        end = start + x.numel()
        if lo <= start and end <= hi:
            as_accurate = _as_accurate(x, c[start - lo : end - lo], ref_worst, atol, rtol)
        else:  # outside the sampled rows, or across their edge
            y = b[start:end].to(x.device, torch.float64)
            as_accurate = (x - y).abs() <= (AS_ACCURATE_MULTIPLE + 1) * ref_worst + atol + rtol * y.abs()
            i0, i1 = max(start, lo), min(end, hi)
            if i0 < i1:
                as_accurate[i0 - start : i1 - start] = _as_accurate(x[i0 - start : i1 - start], c[i0 - lo : i1 - lo],
                                                                    ref_worst, atol, rtol)
        bad += int((far & ~as_accurate).sum().item())
    return bad, non_finite


def _as_accurate(x: torch.Tensor, ref64: torch.Tensor, ref_worst: float, atol: float, rtol: float) -> torch.Tensor:
    z = ref64.to(x.device, torch.float64)
    return (x - z).abs() <= AS_ACCURATE_MULTIPLE * ref_worst + atol + rtol * z.abs()  # NaN compares False: still far


def _flat_span(t: torch.Tensor, rows: tuple[int, int] | None) -> tuple[int, int]:
    """The flat (row-major) index range of leading rows lo:hi of t — contiguous whatever t's strides."""
    if rows is None or t.dim() == 0:
        return 0, t.numel()
    per_row = t.numel() // t.shape[0] if t.shape[0] else 0
    return rows[0] * per_row, rows[1] * per_row


def rows_of(t: torch.Tensor, rows: tuple[int, int] | None) -> torch.Tensor:
    """Leading rows lo:hi of t (all of t when rows is None or t is 0-d)."""
    return t if rows is None or t.dim() == 0 else t[rows[0] : rows[1]]


def reference_worst_error(ref: torch.Tensor, ref64: torch.Tensor) -> float:
    """The reference's largest absolute error against the float64 evaluation, over the elements where both
    are finite (a reference that overflows somewhere grants no allowance elsewhere)."""
    worst = 0.0
    ref, ref64 = ref.detach().reshape(-1), ref64.detach().reshape(-1)  # 0-d outputs (a loss) included
    step = chunk_elements(ref.numel())
    for start in range(0, ref.numel(), step):
        y = ref[start : start + step].double()
        z = ref64[start : start + step].to(y.device, torch.float64)
        err = torch.where(torch.isfinite(y) & torch.isfinite(z), (y - z).abs(), 0.0)
        if err.numel():
            worst = max(worst, float(err.max().item()))
    return worst


def _index(flat: int, shape: torch.Size) -> list[int]:
    idx = []
    for size in reversed(shape):
        idx.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return list(reversed(idx))


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


@dataclass
class OutputVerdict:
    """One output element's comparison (protocol's OutputComparison) and why it failed, if it did."""

    json: dict[str, Any]
    passed: bool
    structural: bool  # a shape or dtype mismatch, not a numerical one
    message: str | None


def compare_output(
    index: int,
    out: torch.Tensor,
    ref: torch.Tensor,
    ref64: torch.Tensor | None,
    atol: float,
    rtol: float,
    rows: tuple[int, int] | None = None,
) -> OutputVerdict:
    """One output's pass mark and error measures; ``rows``: the leading rows ref64 covers (None: all of them)."""
    same_shape = tuple(out.shape) == tuple(ref.shape)
    same_dtype = out.dtype == ref.dtype
    if same_shape and out.device != ref.device:
        out = out.to(ref.device)
    vs_ref = error_stats(out, ref) if same_shape else NO_STATS
    cand64 = error_stats(rows_of(out, rows), ref64) if ref64 is not None and same_shape else NO_STATS
    ref_vs64 = error_stats(rows_of(ref, rows), ref64) if ref64 is not None else NO_STATS
    non_finite = 0
    message = None
    structural = not (same_shape and same_dtype)
    if same_shape and same_dtype:
        bad, non_finite = count_not_close(out, ref, atol, rtol, ref64, rows)
        passed = bad == 0 and non_finite == 0
        if not passed:
            message = _numeric_message(index, out, ref, vs_ref, ref_vs64, bad, non_finite, atol, rtol)
    else:
        if out.is_floating_point():
            non_finite = int((~torch.isfinite(out)).sum().item()) if out.numel() else 0
        passed = False
        if not same_shape:
            message = f"output {index}: shape {list(out.shape)} vs reference {list(ref.shape)}"
        else:
            message = f"output {index}: dtype {dtype_name(out.dtype)} vs reference {dtype_name(ref.dtype)}"
        if not same_shape and not same_dtype:
            message += f" (dtype {dtype_name(out.dtype)} vs {dtype_name(ref.dtype)})"
    json = {
        "index": index,
        "shape": list(out.shape),
        "refShape": list(ref.shape),
        "dtype": dtype_name(out.dtype),
        "refDtype": dtype_name(ref.dtype),
        "allclose": passed,
        "nonFinite": non_finite,
        "vsRef": vs_ref.to_json(),
        "candVsFp64": cand64.to_json(),
        "refVsFp64": ref_vs64.to_json(),
    }
    return OutputVerdict(json, passed, structural, message)


def _numeric_message(
    index: int,
    out: torch.Tensor,
    ref: torch.Tensor,
    vs_ref: ErrorStats,
    ref_vs64: ErrorStats,
    bad: int,
    non_finite: int,
    atol: float,
    rtol: float,
) -> str:
    n = out.numel()
    parts = [f"output {index}:"]
    if non_finite:
        parts.append(f"{non_finite} non-finite (NaN/Inf) of {n} elements;")
    if bad and not (out.is_floating_point() or out.is_complex()):
        parts.append(f"max abs err {_fmt(vs_ref.max_abs)} at {bad} of {n} elements (integer and bool outputs compare "
                     "exactly)")
    elif bad:
        parts.append(f"max abs err {_fmt(vs_ref.max_abs)} > atol+rtol·|ref| ({atol:g}+{rtol:g}·|ref|) at {bad} of {n} elements")
    if vs_ref.worst_index is not None and n:
        at = _index(vs_ref.worst_index, out.shape)
        got = out.reshape(-1)[vs_ref.worst_index].item()
        want = ref.reshape(-1)[vs_ref.worst_index].item()
        parts.append(f"(worst at {at}: {got:.6g} vs {want:.6g}); rel L2 err {_fmt(_finite(vs_ref.rel_l2))}")
    if ref_vs64.rel_l2 is not None:
        parts.append(f"(reference's own rel L2 err vs fp64 {_fmt(_finite(ref_vs64.rel_l2))})")
    return " ".join(parts)


# Precision on the timed path (red team round 13, adv_timed_fp16_guarded). `precision` (checks/output_checks.py) judges
# the candidate's error against float64 on fresh tensors only; every comparison of the timing's calls has no float64
# evaluation and used the pass mark alone. A path taken only when timed (inputs written in place, a call count) that
# computes in float16 or bfloat16 was inside that mark wherever outputs are small (a softmax over 1000 classes: ~1e-3
# each, bf16's error ~4e-6 absolute against atol 1e-4) — tensor cores at a fake speedup on a GPU, `correct`. A timed
# pair of get_inputs() values (the distribution the trials measured) is held to the precision check's own rule, in
# relative L2 distance from the reference: within TIMED_PRECISION_MARGIN × (the larger of PRECISION_MULTIPLE × the
# reference's own error vs float64 in the trials and the dtype's floor, plus that error — the triangle inequality
# through the float64 value the pair does not have). The margin covers a fresh draw's error above the trials'.
PRECISION_MULTIPLE = 10.0
TIMED_PRECISION_MARGIN = 2.0


def precision_floor(dtype: torch.dtype, tf32: bool) -> float:
    """Relative L2 error vs float64 that any computation in `dtype` may have, whatever PyTorch's own is."""
    return {torch.float32: 3e-3 if tf32 else 5e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2,
            torch.float64: 1e-12}.get(dtype, 1e-3)


def tf32_in_use(conv: bool) -> bool:
    """Whether PyTorch's settings let the reference round fp32 operands to TF32: matmuls by the matmul switch,
    convolutions (``conv``: the reference runs one) by cuDNN's (checks/output_checks.tf32_allowed's rule)."""
    return (bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"
            or (conv and bool(torch.backends.cudnn.allow_tf32)))


def timed_precision_bound(reference_error: float | None, dtype: torch.dtype, tf32: bool) -> float | None:
    """The relative L2 distance from the reference a timed output of get_inputs() values may have, given the
    reference's own relative L2 error vs float64 measured in the trials (None: no float64 evaluation, no bound)."""
    if reference_error is None or not math.isfinite(reference_error) or not dtype.is_floating_point:
        return None
    return TIMED_PRECISION_MARGIN * (max(precision_floor(dtype, tf32), PRECISION_MULTIPLE * reference_error)
                                     + reference_error)


# A timed pair whose inputs were drawn off the distribution (timed_inputs.FreshInputPool.vary) has no float64
# evaluation, and the trials' allowance was measured on get_inputs()' values: rows at 1e2 round a hundred times
# coarser. Such a pair fails only where a row is far off — relative L2 error above this, or a non-finite value the
# reference does not share — which is what a path that is wrong off the distribution gets (a NaN, an overflow, a
# row of another scale, zeros). Precision there is input_distribution's to judge, against float64.
OFF_DISTRIBUTION_ROW_ERROR = 1e-2


# (output index, candidate output, reference output, far rows) -> whether those rows are rounding
RowRounding = Callable[[int, torch.Tensor, torch.Tensor, list[tuple[int, float]]], bool]


def compare_timed(index: int, out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float,
                  off_distribution: bool = False, precision: float | None = None,
                  rounding: RowRounding | None = None) -> tuple[bool, str | None]:
    """(passed, message) for one output of a timed pair without float64: the pass mark, or, for a pair whose inputs
    were off the distribution, else no row far off. ``precision``: on a pair of get_inputs() values, the relative L2
    distance from the reference the output may have (timed_precision_bound), or None for none. ``rounding(index,
    out, ref, far)``: whether the far-off rows are rounding after all, judged against a float64 evaluation of the pair's
    inputs (far_rows_are_rounding); asked only on a miss."""
    verdict = compare_output(index, out, ref, None, atol, rtol)
    if verdict.passed and not off_distribution and precision is not None:
        rel = verdict.json["vsRef"]["relL2"]  # None when not finite (a reference of zeros): the pass mark decides
        if rel is not None and rel > precision:
            return False, (f"output {index}: rel L2 err vs the reference {rel:.3g} on a timed call, above "
                           f"{precision:.3g} — the precision check's bound as the trials measured it (twice "
                           f"{PRECISION_MULTIPLE:g}× the reference's own error vs float64, or the dtype's floor): "
                           "computed in lower precision while timed")
    if verdict.passed or verdict.structural or not off_distribution:
        return verdict.passed, verdict.message
    far = far_rows(out, ref, atol)
    if not far or (rounding is not None and rounding(index, out, ref, far)):
        return True, None
    rows = ref.shape[0] if ref.dim() >= 1 else 1
    row, error = far[0]
    return False, (f"output {index}, inputs off the distribution: {len(far)} of {rows} rows far off (row {row}: "
                   f"{'a non-finite value the reference does not have' if math.isinf(error) else f'rel L2 {error:.3g}'}"
                   f", > {OFF_DISTRIBUTION_ROW_ERROR:g})")


def _rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    return t.reshape(rows, max(1, t.numel() // max(1, rows)))


def far_rows(out: torch.Tensor, ref: torch.Tensor, atol: float) -> list[tuple[int, float]]:
    """The rows (leading index) of ``out`` far off the reference's — relative L2 error above
    OFF_DISTRIBUTION_ROW_ERROR, or a non-finite value the reference does not share — each with its error (inf for
    the non-finite)."""
    out = out.to(ref.device)
    rows = ref.shape[0] if ref.dim() >= 1 else 1
    width = max(1, ref.numel() // max(1, rows))
    step = max(1, chunk_elements(ref.numel()) // width)
    far: list[tuple[int, float]] = []
    for start in range(0, rows, step):
        x = _rows(out, rows)[start:start + step].double()
        y = _rows(ref, rows)[start:start + step].double()
        agreed = agreed_non_finite(x, y)
        stray = ((~torch.isfinite(x) | ~torch.isfinite(y)) & ~agreed).any(dim=1)
        x, y = torch.where(agreed, 0.0, x), torch.where(agreed, 0.0, y)
        err = torch.linalg.vector_norm(torch.nan_to_num(x - y, nan=0.0, posinf=0.0, neginf=0.0), dim=1)
        size = torch.linalg.vector_norm(torch.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0), dim=1)
        bad = stray | (err > OFF_DISTRIBUTION_ROW_ERROR * size + atol * math.sqrt(width))
        for i in bad.nonzero().flatten().tolist():
            far.append((start + i, math.inf if bool(stray[i]) else float(err[i] / size[i].clamp_min(1e-300))))
    return far


# A far-off row is still rounding when, against the float64 evaluation of the same inputs, the candidate's error
# there is within this many times the larger of the reference's own error in that row and the reference's median
# row error (judge.py's ROUNDING_MULTIPLE, per row). A row whose exact value nearly cancels (a sum over features of
# terms of both signs) is far off in relative terms for any rounding, the reference's included; a wrong row (zeros,
# a stale answer, another scale) is off by about its own size, orders of magnitude above the rounding of its
# neighbours.
ROW_ROUNDING_MULTIPLE = 10.0
# The float64 evaluation is trusted only while the reference itself is this close to it (relative L2): further off,
# it is not the reference's function on these inputs (a state the float64 copy did not follow), and forgives nothing.
FLOAT64_TRUSTED = OFF_DISTRIBUTION_ROW_ERROR / 4


def far_rows_are_rounding(out: torch.Tensor, ref: torch.Tensor, ref64: torch.Tensor, far: list[tuple[int, float]],
                          window: tuple[int, int] | None = None) -> bool:
    """Whether every far-off row (far_rows) of a timed output is rounding (see ROW_ROUNDING_MULTIPLE), given the
    float64 evaluation ``ref64`` of the same inputs over the leading-index ``window`` of rows (None: all). A row
    outside the window, or a non-finite one, is never rounding."""
    if not far or out.shape != ref.shape or ref.dim() == 0 or not ref.is_floating_point():
        return False
    rows = ref.shape[0]
    lo, hi = window if window is not None else (0, rows)
    if ref64.shape[0] != hi - lo or ref64.numel() != (hi - lo) * (ref.numel() // max(1, rows)):
        return False
    if any(math.isinf(e) or not lo <= r < hi for r, e in far):
        return False
    width = max(1, ref.numel() // max(1, rows))
    step = max(1, chunk_elements(ref.numel()) // width)
    ref_err, cand_err = [], {}
    wanted = {r for r, _ in far}
    total_err = total_size = 0.0
    for start in range(lo, hi, step):
        stop = min(hi, start + step)
        y64 = _rows(ref64, hi - lo)[start - lo:stop - lo].to(ref.device, torch.float64)
        y = _rows(ref, rows)[start:stop].double()
        if not (torch.isfinite(y64).all() and torch.isfinite(y).all()):
            return False
        r_err = torch.linalg.vector_norm(y - y64, dim=1)
        ref_err.append(r_err)
        total_err += float(r_err.square().sum())
        total_size += float(torch.linalg.vector_norm(y64).square())
        hit = [r for r in wanted if start <= r < stop]
        if hit:
            x = _rows(out.to(ref.device), rows)[hit].double()
            c_err = torch.linalg.vector_norm(x - y64[[r - start for r in hit]], dim=1)
            cand_err.update(zip(hit, c_err.tolist()))
    if total_size == 0 or math.sqrt(total_err / total_size) > FLOAT64_TRUSTED:
        return False
    per_row = torch.cat(ref_err)
    typical = float(per_row.median())
    return all(cand_err[r] <= ROW_ROUNDING_MULTIPLE * max(float(per_row[r - lo]), typical) for r in wanted)


def rounding_against(float64: Callable[[], Any]) -> RowRounding:
    """compare_timed's ``rounding`` from a float64 evaluation of the pair's inputs (checks.float64.Float64Eval, or None
    when there is none) that ``float64()`` makes — only on a miss, once for all of the pair's outputs."""
    made: list[Any] = []

    def rounding(index: int, out: torch.Tensor, ref: torch.Tensor, far: list[tuple[int, float]]) -> bool:
        if not made:
            made.append(float64())
        view = made[0]
        if view is None or view.outputs is None or index >= len(view.outputs):
            return False
        return far_rows_are_rounding(out, ref, view.outputs[index], far, view.rows)

    return rounding
