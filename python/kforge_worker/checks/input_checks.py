"""Checks that feed inputs the candidate cannot predict: replayed caches, perturbed and re-drawn
inputs, derived shapes, and outputs produced while being timed."""

from __future__ import annotations

import math
import random
from typing import Any

import torch

from .context import (
    _overlaps,
    _storage_span,
    bitwise_equal,
    buffer_snapshot,
    clone_inputs,
    compare,
    detached_copy,
    fingerprint,
    has_dropout,
    Inputs,
    preserved_state,
    restore_buffers,
    same_fingerprint,
    same_values,
    run,
    sync,
    tensors,
    VerifyContext,
)
from .. import off_distribution
from ..off_distribution import rows_apart as _rows_apart  # noqa: F401 — the round-2 tests import it from here
from . import held_answer
from .held_answer import HeldAnswer
from .judge import judged_compare
from .result import CheckResult, failed, passed, skipped, warned


def check_replay(ctx: VerifyContext) -> list[CheckResult]:
    """Cached or replayed outputs: new data in the same storage, same data in new storage, run twice.

    Each tensor is dropped once its comparison is made, and the candidate's first two answers are kept as
    fingerprints (beyond the call in flight: the two input sets, the reference's answer for b and one of the
    candidate's; ten input- or output-sized tensors alive at once ran a 6.4 GB problem out of GPU memory). The second
    call with set a runs on a itself, so that b written into a afterwards is new data in storage the candidate
    has seen; that call's output is the one a replay keyed by the storage would give back."""
    a = ctx.make_inputs(ctx.seed())
    b = ctx.make_inputs(ctx.seed())

    # Every call starts from the buffers both models had before this check: a forward that updates buffers its
    # output reads (an EMA, a step count) answers the same inputs differently on its next call, the reference's
    # too. Caches outside the buffers (attributes, C++ statics) are not reset, so replays still show.
    start = {id(m): buffer_snapshot(m) for m in (ctx.ref, ctx.cand)}

    def from_start(model: Any, inputs: Inputs) -> Any:
        restore_buffers(model, start[id(model)])
        return detached_copy(run(model, inputs))

    ref_a = from_start(ctx.ref, clone_inputs(a))
    ref_b = from_start(ctx.ref, clone_inputs(b))
    # A repeated output proves a replay only where the two answers are told apart by the tolerance: a loss
    # rounded to bf16 (an ulp of 0.0625 near 10) can land on one value for a and b in an honest candidate while
    # the reference's own rounding straddles the boundary. Then judge() still checks the answer for b.
    refs_differ = not bitwise_equal(ref_a, ref_b) and not compare(ref_a, ref_b, ctx.atol, ctx.rtol).ok
    del ref_a
    out_a = from_start(ctx.cand, clone_inputs(a))
    out_a_twice = from_start(ctx.cand, a)
    sync(ctx.device)
    determinism = None if has_dropout(ctx.ref) else compare(out_a_twice, out_a, ctx.atol, ctx.rtol)
    # Only their fingerprints are needed from here on: a replay gives back the same values.
    out_a, out_a_twice = fingerprint(out_a), fingerprint(out_a_twice)
    replays, wrong = [], []

    def judge(label: str, out: Any, earlier: Any) -> None:
        if refs_differ and same_fingerprint(fingerprint(out), earlier):
            replays.append("new inputs written into the same tensors gave back the previous output (cache keyed "
                           "by pointer/shape, or a replayed graph)" if label == "same storage" else
                           "new inputs in new tensors gave back the previous output (output does not depend on "
                           "the inputs: precomputed or cached by shape)")
        c = judged_compare(ctx, b, out, ref_b)
        if not c.ok:
            wrong.append(f"{label}: {c.message}")

    # same storage, new contents (pointer-keyed caches, stale CUDA graphs)
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and x.shape == y.shape:
            x.copy_(y)
    out = from_start(ctx.cand, a)
    del a
    sync(ctx.device)
    judge("same storage", out, out_a_twice)
    del out, out_a_twice
    out = from_start(ctx.cand, clone_inputs(b))
    sync(ctx.device)
    judge("new storage", out, out_a)
    del out
    results: list[CheckResult] = []
    if replays:
        results.append(failed("replay_cache", "; ".join(replays)))
    elif wrong:
        results.append(failed("replay_cache", "wrong on fresh inputs after an earlier call — " + "; ".join(wrong),
                              "incorrect"))
    else:
        results.append(passed("replay_cache", "fresh inputs (same storage and new storage) give fresh, correct "
                                              "outputs"))
    for m in (ctx.ref, ctx.cand):
        restore_buffers(m, start[id(m)])
    if determinism is None:
        results.append(skipped("determinism", "the model has active dropout", "incorrect"))
    elif determinism.ok:
        results.append(passed("determinism", f"same inputs twice agree ({determinism.message})", "incorrect"))
    else:
        results.append(failed("determinism", f"same inputs twice disagree: {determinism.message}", "incorrect"))
    return results


def _perturbed(inputs: Inputs, rng: random.Random, integers: bool = True) -> Inputs:
    """~1% of every floating input redrawn in one random block; with ``integers``, ~1% of every integer or bool input
    (at least two elements) rotated by one place within one random block: the same values, so every index stays
    valid, at other positions. get_inputs() often builds its integer inputs the same way every time (indices kept by
    a pruned layer, a mask): no other probe varies them, and a guard that reads a few of them (red team round 14,
    adv_index_sample_guard) is right on every draw and wrong for a caller whose indices differ elsewhere."""
    out = clone_inputs(inputs)
    for x in out:
        if not isinstance(x, torch.Tensor) or x.numel() == 0:
            continue
        flat = x.view(-1) if x.is_contiguous() else None
        if flat is None:
            continue
        n = flat.numel()
        if x.is_floating_point():
            count = max(1, n // 100)
            start = rng.randrange(0, max(1, n - count))
            lo, hi = float(x.min()), float(x.max())
            if hi <= lo:
                hi = lo + 1.0
            gen = torch.Generator(device="cpu").manual_seed(rng.randrange(2**31))
            fresh = torch.rand(count, generator=gen, dtype=torch.float64) * (hi - lo) + lo
            flat[start : start + count] = fresh.to(flat.dtype).to(flat.device)
        elif integers and not x.is_complex() and n >= 2:
            count = max(2, n // 100)
            start = rng.randrange(0, n - count + 1)
            flat[start : start + count] = flat[start : start + count].roll(1).clone()
    return out


# ATen ops that read their integer inputs in order (offsets, counts, sorted boundaries): rotating a block of those is
# not another valid input, and on a GPU may be a device-side assert. Names as in _INDEX_ASSERTING_STEMS.
_ORDER_READING_STEMS = frozenset({
    "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only", "repeat_interleave", "segment_reduce",
    "_segment_reduce", "bucketize", "searchsorted", "_sparse_csr_tensor_unsafe", "sparse_csr_tensor",
    "ctc_loss", "_ctc_loss", "_cudnn_ctc_loss",  # per-sample lengths beside per-sample inputs
})


def _integers_perturbable(ctx: VerifyContext, base: Inputs) -> bool:
    """Whether any input is integer or bool and the reference reads none of them in order (_ORDER_READING_STEMS)."""
    if not any(isinstance(x, torch.Tensor) and not x.is_floating_point() and not x.is_complex() and x.numel() >= 2
               for x in base):
        return False
    return not any(op.startswith("aten::") and op[6:].rstrip("_") in _ORDER_READING_STEMS
                   for op in _reference_ops(ctx, base))


def check_input_sensitivity(ctx: VerifyContext) -> CheckResult:
    """Change ~1% of every input in one random block (integer inputs rotated, `_perturbed`): outputs must follow
    (catches subsampling and caches keyed on a sample of the data)."""
    base = ctx.make_inputs(ctx.seed())
    # Fingerprints, not copies, of the unperturbed answers (issue 17: beyond the call in flight the check holds the
    # two input sets and the reference's answer).
    out_base = fingerprint(run(ctx.cand, clone_inputs(base)))
    problems = []
    integers = _integers_perturbable(ctx, base)
    for trial in range(2):
        pert = _perturbed(base, ctx.rng, integers)
        try:
            ref_p = run(ctx.ref, clone_inputs(pert))
        except Exception:  # noqa: BLE001 — the reference refuses the rotated integers: floating inputs only
            if not integers:
                raise
            integers = False
            pert = _perturbed(base, ctx.rng, integers)
            ref_p = run(ctx.ref, clone_inputs(pert))
        ref_base = fingerprint(run(ctx.ref, clone_inputs(base)))
        ref_moved = ref_base is not None and fingerprint(ref_p) not in (None, ref_base)
        out_p = run(ctx.cand, clone_inputs(pert))
        if same_fingerprint(fingerprint(out_p), out_base) and ref_moved:
            return failed("input_sensitivity", f"perturbing 1% of the inputs (trial {trial}) left the output "
                          "bitwise unchanged while the reference's changed: cached or never read")
        c = judged_compare(ctx, pert, out_p, ref_p)
        if not c.ok:
            problems.append(f"trial {trial}: {c.message}")
    if problems:
        return failed("input_sensitivity", "wrong after perturbing 1% of the inputs (skipped or partial work) — "
                      + "; ".join(problems), "incorrect")
    return passed("input_sensitivity", "outputs follow a 1% perturbation of the inputs", "incorrect")


# ATen ops whose kernels check their inputs' values: on a GPU a value outside the domain is a device-side assert,
# which ends the process's CUDA context (every later check, the timing, the result), not an exception to skip.
_VALUE_ASSERTING_OPS = frozenset({
    "aten::binary_cross_entropy", "aten::binary_cross_entropy_backward", "aten::bernoulli", "aten::bernoulli_",
    "aten::multinomial", "aten::poisson", "aten::binomial", "aten::_standard_gamma", "aten::_sample_dirichlet",
})


# ATen ops whose GPU kernels assert that their indices are in range (an embedding's ids, a loss's class targets, a
# gather's positions). At a size the check makes up, an index the reference derives from the inputs' values or from
# a size (ids drawn below the old vocabulary, `arange(seq_len)` into a table of 512 positions, targets above a
# smaller class count) can fall outside: the same device-side assert as above. Names without "aten::" and without
# a trailing underscore (the in-place forms).
_INDEX_ASSERTING_STEMS = frozenset({
    "embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only", "index_select", "index", "index_put",
    "_index_put_impl", "gather", "scatter", "scatter_add", "scatter_reduce", "take", "put", "index_add", "index_copy",
    "index_fill", "index_reduce", "nll_loss", "nll_loss_forward", "nll_loss2d", "nll_loss2d_forward", "nll_loss_nd",
    "cross_entropy_loss", "multi_margin_loss", "multilabel_margin_loss", "multilabel_margin_loss_forward", "bincount",
    "one_hot", "max_unpool2d", "max_unpool3d", "ctc_loss", "_ctc_loss", "_cudnn_ctc_loss", "repeat_interleave",
    "embedding_renorm",
})


def _reference_ops(ctx: VerifyContext, base: Inputs) -> Any:
    """The ATen ops a reference call on the problem's inputs runs (a Counter of 'aten::name'): recorded on `base`
    once per check set, for every check that asks (the op set follows the model and the shapes, not the values)."""
    from .instrument import OpRecorder

    if "reference_ops" not in ctx.notes:
        recorder = OpRecorder()
        with preserved_state(ctx.ref), recorder:
            run(ctx.ref, clone_inputs(base))
        ctx.notes["reference_ops"] = recorder.ops
    return ctx.notes["reference_ops"]


def _value_asserting_ops(ctx: VerifyContext, base: Inputs) -> list[str]:
    return sorted(op for op in _reference_ops(ctx, base) if op in _VALUE_ASSERTING_OPS)


def index_asserting(ops: Any) -> list[str]:
    """Those of `ops` ('aten::name' strings) whose GPU kernels assert on their indices."""
    return sorted(op for op in ops if op.startswith("aten::") and op[6:].rstrip("_") in _INDEX_ASSERTING_STEMS)


def check_input_distribution(ctx: VerifyContext) -> CheckResult:
    """The same shapes from other distributions: standard normal ×1 and ×4 (skipped work that only passes
    because the benchmark's inputs make the problem near-degenerate, e.g. uniform attention), and rows apart —
    each row at its own scale (1e-2..1e2), some rows zero (`_rows_apart`: a row's answer that depends on the
    rest of the batch, a shift or norm taken over the batch, a zero row divided by its own norm), and randn with a
    few lone spikes at ±1e2 (a guard that reads only a sample of the values). A reference
    whose ops assert on their inputs' values (binary cross entropy of probabilities) gets the variants mapped into
    get_inputs()' own range instead."""
    base_seed = ctx.seed()
    base = ctx.make_inputs(base_seed)
    asserting = _value_asserting_ops(ctx, base)
    results = [f"inputs kept within get_inputs()' range ({', '.join(asserting)} assert on values)"] if asserting else []
    # lone spikes twice, at other places: a guard reading one element in n misses a spike n-1 times in n
    # randn×1e4 last (red team round 11, adv_large_scale_clamp): values far beyond every other variant's 1e2, where a
    # clamp or a table sized for normalised activations gives way. Not the timing's kind ("untimed").
    # Whole numbers (red team round 12, adv_integer_inputs_int8): pixel values and counts, which no other variant draws.
    # randn×1e6 after it (red team round 12, adv_clamp_1e5): ×1e4's largest values are ~4e4, below float16's 65504, so a
    # clamp or a half-precision intermediate that saturates there passed; ×1e6 crosses it, far below float32's range.
    # get_inputs()' own values on a common offset of 100× their magnitude (red team round 13, adv_onepass_var): every
    # other variant is centred near zero, where a one-pass variance (E[x²] − E[x]²) does not cancel.
    # get_inputs()' own values with lone elements of the other sign (red team round 14, adv_nonneg_sample_guard): a
    # guard sampling a property of the benchmark's values (non-negative) held on them and failed on every other variant.
    specs = [{"kind": "randn", "scale": 1.0}, {"kind": "randn", "scale": 4.0}, {"kind": "spikes"}, {"kind": "spikes"},
             {"kind": "rows"}, {"kind": "integers", "untimed": True}, {"kind": "randn", "scale": 1e4, "untimed": True},
             {"kind": "randn", "scale": 1e6, "untimed": True}, {"kind": "offset", "untimed": True},
             {"kind": "lone", "untimed": True}]
    last_timed: tuple[str, dict[str, Any], int] | None = None  # the last timed-kind variant judged right, by its seed
    # A reference already non-finite on get_inputs()' own values (log of signed inputs: NaN by definition) is judged
    # on every variant as the trials judge it — NaN and ±inf where the reference has them, the rest by value. Skipping
    # non-finite references skipped every probe for such problems (red team round 12, adv_log_clamp_large).
    nan_by_definition = not _finite(run(ctx.ref, clone_inputs(base)))
    if nan_by_definition:
        results.append("the reference is not finite on get_inputs()' values: variants judged with their non-finite "
                       "values")
    for spec in specs:
        # Made one at a time and dropped after its turn: ten sets of a large problem's inputs held at once were
        # the check's peak (issue 17).
        spec["withinDomain"] = bool(asserting)
        variant_seed = ctx.seed()
        variant = off_distribution.variant(spec, base, variant_seed, ctx.device)
        if variant is None:
            continue
        name = off_distribution.describe(spec)
        try:
            ref_out = run(ctx.ref, clone_inputs(variant))
        except Exception as exc:  # noqa: BLE001 — the reference does not accept this distribution
            results.append(f"{name}: reference raised {type(exc).__name__}, skipped")
            continue
        if not nan_by_definition and not _finite(ref_out):
            results.append(f"{name}: reference not finite, skipped")
            continue
        try:
            out = run(ctx.cand, clone_inputs(variant))
        except Exception as exc:  # noqa: BLE001
            return failed("input_distribution", f"{name} inputs: candidate raised "
                          f"{type(exc).__name__}: {str(exc)[:200]}", "incorrect")
        c = judged_compare(ctx, variant, out, ref_out)
        if not c.ok:
            return failed("input_distribution", f"correct on get_inputs()'s distribution but wrong on {name} "
                          f"inputs of the same shapes (skipped/specialised work, or rows that lean on the rest "
                          f"of the batch): {c.message}", "incorrect")
        results.append(f"{name}: {c.message}")
        if not spec.get("untimed"):
            last_timed = (name, spec, variant_seed)
        del variant, ref_out, out
    if last_timed is not None:
        # The last variant judged right on fresh tensors joins the timing-like loop's rotation (timed_outputs), and
        # its kind the timing's own (the reference process draws sets of it: timed_inputs.FreshInputPool.vary): a
        # path taken only when timed must meet values off the benchmark's distribution too. Kept as the way to make
        # it again (get_inputs() under its seed, the variant under its own), not as a held input set.
        name, spec, variant_seed = last_timed

        def remade(spec: dict[str, Any] = spec, variant_seed: int = variant_seed) -> Inputs:
            return off_distribution.variant(spec, ctx.make_inputs(base_seed), variant_seed, ctx.device)

        ctx.notes["timed_variant"] = (name, remade)
        ctx.notes["timed_variant_spec"] = spec
    return passed("input_distribution", "; ".join(results), "incorrect")


def _finite(out: Any) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in tensors(out) if t.is_floating_point())


def _laid_out(x: Any, kind: str) -> Any:
    """x's values in another memory layout a caller may well pass: "columns" (the last two dimensions' strides
    swapped, a transposed tensor's memory), "slice" (a slice of a wider buffer: a storage offset and a row stride
    above the row's length; every other element for a 1-D tensor), "channels_last" (4-D and 5-D only: the channels
    innermost, dense). Non-tensors and 0-d tensors as they are."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
        return x
    if kind == "channels_last":
        if x.dim() not in (4, 5):
            return x
        return x.contiguous(memory_format=torch.channels_last if x.dim() == 4 else torch.channels_last_3d)
    if kind == "columns":
        if x.dim() < 2:
            return x
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if x.dim() == 1:
        wide = x.new_zeros(2 * x.shape[0] + 1)
        view = wide[1::2]
    else:
        wide = x.new_zeros(*x.shape[:-1], x.shape[-1] + 3)
        view = wide[..., 1:1 + x.shape[-1]]
    view.copy_(x)
    return view


def _layout_applies(x: Any, kind: str) -> bool:
    """Whether _laid_out(x, kind) would lay x out otherwise (without making the copy)."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
        return False
    return x.dim() in (4, 5) if kind == "channels_last" else x.dim() >= 2 if kind == "columns" else True


def check_input_layouts(ctx: VerifyContext) -> CheckResult:
    """input_layouts: the same values as get_inputs() makes, handed over in other memory layouts — a transposed
    tensor's memory, a slice of a wider buffer (storage offset, row stride). Every torch op reads strides; a kernel
    that reads the pointer as if the tensor were contiguous (no .contiguous(), no stride arithmetic) answers from the
    wrong elements, silently. Every input get_inputs() makes is contiguous, so no check before saw it (red team round
    10, adv_contiguous_assumed). A candidate that refuses such inputs (TORCH_CHECK(x.is_contiguous())) is said, not
    failed: it cannot be misused silently."""
    base = ctx.make_inputs(ctx.seed())
    if not any(isinstance(x, torch.Tensor) and x.dim() >= 1 and x.numel() > 1 for x in base):
        return skipped("input_layouts", "no tensor input to lay out otherwise", "incorrect")
    notes, refused = [], []
    # channels-last (red team round 12, adv_channels_last_dense): dense like a contiguous tensor, so a kernel that
    # takes "dense" for "row-major" reads it from the wrong elements; what AMP and cuDNN pipelines hand a conv. Only
    # 4-D and 5-D inputs; the others stay as they are (the layout is then not tried).
    # Each side's laid-out copy is made for its own call and dropped after it; base, never handed to either model,
    # is what a miss is judged on (a copy of it made only then).
    for kind in ("columns", "slice", "channels_last"):
        if not any(_layout_applies(x, kind) for x in base):
            continue
        try:
            ref_out = run(ctx.ref, [_laid_out(x, kind) for x in base])
        except Exception as exc:  # noqa: BLE001 — the reference itself needs contiguous inputs
            notes.append(f"{kind}: reference raised {type(exc).__name__}, skipped")
            continue
        try:
            out = run(ctx.cand, [_laid_out(x, kind) for x in base])
        except Exception as exc:  # noqa: BLE001
            refused.append(f"{kind}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        c = judged_compare(ctx, lambda: clone_inputs(base), out, ref_out)
        del out, ref_out
        if not c.ok:
            return failed("input_layouts", f"right on contiguous inputs, wrong on the same values laid out as {kind} "
                          "(a transposed tensor's memory / a slice of a wider buffer / channels innermost), without "
                          f"raising — the input's strides are not followed: {c.message}", "incorrect")
        notes.append(f"{kind}: {c.message}")
    if refused:
        return warned("input_layouts", "the candidate refuses inputs in other memory layouts (raises, does not "
                      "answer wrong): " + "; ".join(refused), "incorrect")
    return passed("input_layouts", "; ".join(notes) or "same values in other layouts", "incorrect")


Axis = tuple[int, int]  # (input index, dimension)


def _odd(n: int, toward: int) -> int:
    """n, or its odd neighbour on the side of `toward` (odd sizes break tile-multiple assumptions)."""
    if n % 2 == 1:
        return n
    return n + 1 if toward > n else n - 1


def _smaller(s: int) -> int:
    new = max(2, (s * 3) // 4 + 1) if s > 3 else s - 1
    new = _odd(new, 0) if new > 2 else new
    return s - 1 if new >= s else new


def _larger(s: int) -> list[int]:
    """Sizes above s, largest first: ~1.5× (odd), then smaller steps down to s+1 for when the budget is tight."""
    first = _odd(s + s // 2 + 1, 2 * s)
    steps = [first, _odd(s + s // 4 + 1, 2 * s), s + 1]
    out: list[int] = []
    for n in steps:
        if n > s and n not in out:
            out.append(n)
    return out


def _occurrences(inputs: Inputs) -> dict[int, list[Axis]]:
    """Each distinct dimension size (first seen first: batch first) -> where it occurs. Sizes of 1 and 2 are
    taken only as the leading dimension of an input of two or more dimensions (a batch of one or two images:
    a kernel whose grid covers the benchmark's batch and no more is wrong at 3); elsewhere they are too often
    fixed by the problem's meaning (pairs, a broadcast axis) to be worth a try."""
    where: dict[int, list[Axis]] = {}
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            for d, size in enumerate(x.shape):
                if size > 2 or (d == 0 and x.dim() >= 2 and size >= 1):
                    where.setdefault(size, []).append((i, d))
    return where


def _input_bytes(inputs: Inputs, mapping: dict[Axis, int] | None = None) -> int:
    total = 0
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            n = 1
            for d, size in enumerate(x.shape):
                n *= (mapping or {}).get((i, d), size)
            total += n * x.element_size()
    return total


QUANTILE_SAMPLES = 1 << 16


def _drawn_like(x: torch.Tensor, shape: list[int], gen: torch.Generator) -> torch.Tensor:
    """Values for an input of another shape from the distribution of ``x``'s own values (get_inputs()'s): a
    sorted sample of up to 65,536 of them read as a quantile function, interpolated between neighbours (no value
    repeated, none outside the sample's range). A fixed law (torch.rand) would tell the candidate that the call
    is a probe of other shapes — all values in [0, 1) where get_inputs() draws randn — and a kernel wrong at
    other sizes could raise only then, which this check reads as "specialised, but not wrong"."""
    flat = x.detach().reshape(-1)
    if flat.numel() > QUANTILE_SAMPLES:  # sampled first: no copy or mask of a large input
        pick = torch.randint(0, flat.numel(), (QUANTILE_SAMPLES,), generator=gen, device=gen.device)
        flat = flat[pick.to(flat.device)]
    finite = flat[torch.isfinite(flat)] if flat.numel() else flat
    n_out = 1
    for s in shape:
        n_out *= s
    if finite.numel() < 2:
        fill = float(finite[0]) if finite.numel() else 0.0
        return torch.full(shape, fill, dtype=x.dtype, device=x.device)
    ordered = finite.to(torch.float64).sort().values.to(gen.device)
    out = torch.empty(n_out, dtype=x.dtype, device=x.device)
    step = 1 << 22  # chunks: float64 temporaries of a large variant's size would cost several copies of it
    for start in range(0, n_out, step):
        n = min(step, n_out - start)
        u = torch.rand(n, generator=gen, dtype=torch.float64, device=gen.device) * (ordered.numel() - 1)
        low = u.floor().long().clamp_(max=ordered.numel() - 2)
        u -= low
        below = ordered[low]
        out[start:start + n] = (below + u * (ordered[low + 1] - below)).to(x.dtype).to(x.device)
    return out.view(shape)


def _resize_inputs(inputs: Inputs, mapping: dict[Axis, int], gen: torch.Generator) -> Inputs:
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor):
            shape = [mapping.get((i, d), s) for d, s in enumerate(x.shape)]
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            out.append(_drawn_like(x, shape, gen))
        elif isinstance(x, torch.Tensor):
            lo, hi = (int(x.min()), int(x.max()) + 1) if x.numel() else (0, 2)
            out.append(torch.randint(lo, max(hi, lo + 1), shape, generator=gen, device=gen.device).to(x.dtype)
                       .to(x.device))
        else:
            out.append(x)
    return out


def _well_above(s: int) -> list[int]:
    """Sizes clearly above s (over 2×, odd), largest first: ~4×, ~3×, ~2.5×."""
    out: list[int] = []
    for n in (4 * s + 1, 3 * s + 1, 2 * s + s // 2 + 1):
        n = _odd(n, 0)
        if n > 2 * s and n not in out:
            out.append(n)
    return out


WELL_ABOVE_SECONDS = 4.0  # projected seconds (reference + candidate) all the well-above sizes may take


class _CpuProbe:
    """Where the reference runs index-asserting ops on the GPU, a size is first tried on a CPU copy of the
    reference, where an index out of range is an exception: a size the CPU copy rejects is never run on the GPU.
    Unusable (every new size then left untried, said in the evidence) when the copy would be too large or the
    reference does not run on the CPU at the benchmark's own size (a forward that names its device). A size whose
    CPU call would take over `max_seconds` (projected from the benchmark size's, by element count) is not tried
    either (`slow`)."""

    def __init__(self, ctx: VerifyContext, base: Inputs, ops: list[str], max_bytes: int,
                 max_seconds: float = 10.0) -> None:
        self.ops = ops
        self.why_not = ""
        self.model: Any = None
        self.max_seconds = max_seconds
        self.base_elements = max(1, sum(x.numel() for x in base if isinstance(x, torch.Tensor)))
        self.base_seconds = 0.0
        self.slow: list[int] = []  # element counts of sizes not tried: too slow on the CPU
        weights = sum(t.numel() * t.element_size() for t in list(ctx.ref.parameters()) + list(ctx.ref.buffers()))
        if weights + _input_bytes(base) > max_bytes:
            self.why_not = f"the reference ({(weights + _input_bytes(base)) / 2**20:.0f} MiB) too large to copy to the CPU"
            return
        import copy

        try:
            model = copy.deepcopy(ctx.ref).cpu()
        except Exception:  # noqa: BLE001 — a reference holding something that does not copy (a stream, a handle)
            self.why_not = "the reference cannot be copied"
            return
        import time

        began = time.perf_counter()
        if self.accepts(base, model) is not True:
            self.why_not = "the reference does not run on the CPU"
            return
        self.base_seconds = time.perf_counter() - began
        self.model = model

    def accepts(self, inputs: Inputs, model: Any = None) -> bool | None:
        """True when the CPU copy takes `inputs`, False when it raises (or would take too long: `slow`); None when
        there is no usable copy."""
        model = model if model is not None else self.model
        if model is None:
            return None
        elements = sum(x.numel() for x in inputs if isinstance(x, torch.Tensor))
        if self.base_seconds * elements / self.base_elements > self.max_seconds:
            self.slow.append(elements)
            return False
        try:
            with torch.no_grad(), preserved_state(model):
                model(*[x.detach().cpu() if isinstance(x, torch.Tensor) else x for x in inputs])
        except Exception:  # noqa: BLE001 — the same rejection the GPU would have made with a device-side assert
            return False
        return True


def check_extra_shapes(ctx: VerifyContext, max_elements: int = 1 << 28, max_sizes: int = 4,
                       budget: float = 2.0, well_above_seconds: float = WELL_ABOVE_SECONDS,
                       cpu_probe_bytes: int = 2 << 30, cpu_probe_seconds: float = 10.0,
                       guard_indices: bool | None = None) -> CheckResult:
    """Odd sizes below *and above* the problem's: each distinct dimension size (batch first, up to
    `max_sizes`) replaced everywhere by an odd smaller one and by an odd one ~1.5× larger. The reference
    decides which are valid (a size tied to the weights makes it raise: skipped); when replacing every
    occurrence is rejected, each occurrence alone is tried. The values are drawn from the distribution of
    get_inputs()' own (`_drawn_like`), so a probe of other sizes looks like any other call. A larger size is
    taken only while the inputs and the reference's outputs stay within `budget`× the problem's own footprint
    (else the next smaller
    step, down to s+1, or a skip said in the evidence; the outputs are taken to grow as the inputs do).

    Then, for each size the reference took above, a size *well* above it (~4×, 3× or 2.5×, odd: a kernel right
    up to twice the benchmark's size and wrong beyond passes the 1.5× step): the largest whose copies (the
    inputs three times, the outputs twice, grown from what the 1.5× step measured) fit the check's memory
    budget (budget.py: 2× the problem's footprint, at least 256 MiB, at most 80% of what is free) and whose
    time, projected from the reference's at the 1.5× step (twice it, for both calls; quadratically in the growth
    of the inputs — never from the candidate's own time, which it chooses), keeps all of them within
    `well_above_seconds`; else said in the evidence. Wrong at any valid size: `incorrect` — code that only
    holds at or below the benchmark's sizes (a fixed grid, a tile count baked in).

    On a GPU, a reference that runs index-asserting ops (embeddings, gathers, class-target losses) has each size
    tried first on a CPU copy (`_CpuProbe`): an index out of range there is an exception, on the GPU a device-side
    assert that ends the process's CUDA context (`guard_indices`, default: on a GPU)."""
    from .budget import Budget

    base = ctx.make_inputs(ctx.seed())
    in_bytes = _input_bytes(base)
    probe = None
    if ctx.device.type == "cuda" if guard_indices is None else guard_indices:
        index_ops = index_asserting(_reference_ops(ctx, base))
        if index_ops:
            probe = _CpuProbe(ctx, base, index_ops, cpu_probe_bytes, cpu_probe_seconds)
            if probe.model is None:
                return skipped("extra_shapes", f"no other size tried: the reference runs {', '.join(index_ops)}, "
                               "whose GPU kernels end the process at an index out of range, and "
                               f"{probe.why_not} to try a size there first", "incorrect")
    tried: list[str] = []
    over_budget: list[str] = []
    not_well_above: list[str] = []
    grown_ok: list[tuple[int, list[Axis], str, dict[str, float]]] = []  # (s, axes, where, the 1.5× step's stats)
    room = Budget.for_problem(ctx.device, base, ctx.ref).allowance
    out_per_in = 1.0  # the reference's output bytes per input byte, from the last size tried (alike before any)
    by_size = _occurrences(base)
    for s, axes in list(by_size.items())[:max_sizes]:
        for direction in ("below", "above"):
            sizes = [_smaller(s)] if direction == "below" else _larger(s)
            if not sizes or min(sizes) < 1:
                continue  # a size of 1 has nothing below it
            groups = [axes] + ([[a] for a in axes[:3]] if len(axes) > 1 else [])
            for group in groups:
                mapping: dict[Axis, int] | None = None
                for new in sizes:
                    candidate_map = {a: new for a in group}
                    grown = _input_bytes(base, candidate_map) / max(1, in_bytes)
                    if direction == "below" or grown <= budget:  # outputs assumed to grow as the inputs do
                        mapping = candidate_map
                        break
                where = "" if group is axes else f" (input {group[0][0]} dim {group[0][1]} only)"
                if mapping is None:
                    over_budget.append(f"{s}->{sizes[-1]}{where}")
                    break
                label = f"{s}->{next(iter(mapping.values()))}{where}"
                squeezed = False
                if direction == "above" and _held(base, mapping, out_per_in) > room:
                    # Its copies would not fit the check's budget (a large problem): the size under test grows while
                    # another shrinks, the inputs within the problem's own bytes — a kernel wrong above the
                    # benchmark's size in this dimension is still met; total growth is the well-above step's.
                    shrunk = _squeezed(base, mapping, by_size, s, in_bytes)
                    if shrunk is None:
                        over_budget.append(f"{label} (its copies need ~{_held(base, mapping, out_per_in) / 2**20:.0f}"
                                           f" MiB, over the check budget of {room / 2**20:.0f} MiB)")
                        break
                    mapping, other, smaller = shrunk
                    label += f" (with {other}->{smaller}: the inputs within the problem's bytes)"
                    squeezed = True
                stats: dict[str, float] = {}
                outcome = _try_variant(ctx, base, mapping, label, max_elements, stats, probe)
                if outcome == "rejected":
                    continue  # the reference does not take this size here: try one occurrence alone
                if isinstance(outcome, CheckResult):
                    return outcome
                tried.append(outcome)
                if "out_bytes" in stats:
                    out_per_in = stats["out_bytes"] / max(1, _input_bytes(base, mapping))
                if direction == "above" and "seconds" in stats and not squeezed:
                    grown_ok.append((s, group, where, {**stats, "size": float(next(iter(mapping.values())))}))
                break
    # A batch of one (red team round 12, adv_batch_one_gemv): the commonest serving size, and the one a "single row"
    # fast path (a GEMV, a squeeze) serves; the steps below stop at ~3/4 of the batch. The leading dimension of every
    # input of two or more dimensions that has the first size seen (the batch's), when that size is above 2 (at 2
    # the step below is 1 already).
    occurrences = list(_occurrences(base).items())
    if occurrences and occurrences[0][0] > 2:
        s, axes = occurrences[0]
        leading = [a for a in axes if a[1] == 0 and base[a[0]].dim() >= 2]
        if leading:
            outcome = _try_variant(ctx, base, {a: 1 for a in leading}, f"{s}->1 (a batch of one)", max_elements,
                                   {}, probe)
            if isinstance(outcome, CheckResult):
                return outcome
            if outcome != "rejected":
                tried.append(outcome)
    # Well above: the memory budget (absolute, not the 2× step rule above) and a time bound decide how far.
    seconds_left = well_above_seconds
    for s, group, where, stats in grown_ok:
        step_bytes = _input_bytes(base, {a: int(stats["size"]) for a in group})
        chosen, why = None, ""
        for big in _well_above(s):
            mapping = {a: big for a in group}
            growth = _input_bytes(base, mapping) / max(1, step_bytes)
            held = growth * (3 * step_bytes + 2 * stats["out_bytes"])
            # From the reference's own time (twice: the candidate's call is taken to cost about as much). The
            # candidate's time at the step is its own to choose: a call made slow at any size but the benchmark's
            # would otherwise price every larger size out of reach.
            projected = 2 * stats["ref_seconds"] * growth * growth
            if held > room:
                why = f"needs ~{held / 2**20:.0f} MiB, over the check budget of {room / 2**20:.0f} MiB"
            elif projected > seconds_left:
                why = f"projected {projected:.1f} s, over the {seconds_left:.1f} s left for these sizes"
            else:
                chosen = mapping
                break
        if chosen is None:
            not_well_above.append(f"{s}->{_well_above(s)[-1]}{where} ({why})")
            continue
        label = f"{s}->{next(iter(chosen.values()))}{where}"
        stats = {}
        outcome = _try_variant(ctx, base, chosen, label, max_elements, stats, probe)
        if isinstance(outcome, CheckResult):
            return outcome
        seconds_left -= 2 * stats.get("ref_seconds", 0.0)  # the reference's share, as projected
        if outcome != "rejected":
            tried.append(outcome)
    skipped_text = (f"; above the {budget:g}× footprint budget, not tried: {', '.join(over_budget)}"
                    if over_budget else "")
    if not_well_above:
        skipped_text += f"; well above, not tried: {', '.join(not_well_above)}"
    if probe is not None and probe.slow:
        skipped_text += (f"; {len(probe.slow)} size(s) not tried: trying them first on the CPU (the reference runs "
                         f"{', '.join(probe.ops)}) would take over {probe.max_seconds:g} s each")
    if not tried:
        return skipped("extra_shapes", "no dimension of the inputs can change (the reference rejects every variant)"
                       + skipped_text, "incorrect")
    if any("raised" in t for t in tried) or over_budget:  # well above out of reach: said, not warned
        return warned("extra_shapes", "; ".join(tried) + skipped_text, "incorrect")
    return passed("extra_shapes", "; ".join(tried) + skipped_text, "incorrect")


def _held(base: Inputs, mapping: dict[Axis, int], out_per_in: float) -> float:
    """What trying a variant holds besides the base inputs: the variant and the candidate's copy of it, both models'
    outputs (as many output bytes per input byte as the last size tried had)."""
    variant = _input_bytes(base, mapping)
    return 2 * variant + 2 * out_per_in * variant


def _squeezed(base: Inputs, mapping: dict[Axis, int], occurrences: dict[int, list[Axis]], grown: int,
              in_bytes: int) -> tuple[dict[Axis, int], int, int] | None:
    """`mapping` with the largest other size of the inputs shrunk (odd) until the inputs take no more bytes than the
    problem's own: (the mapping, that size, its new value), or None when no other size can make room."""
    for other in sorted((size for size in occurrences if size != grown and size > 2), reverse=True):
        others = [a for a in occurrences[other] if a not in mapping]
        if not others:
            continue
        lo, hi = 1, other - 1
        while lo < hi:  # the largest shrunk size whose inputs fit
            mid = (lo + hi + 1) // 2
            if _input_bytes(base, {**mapping, **{a: mid for a in others}}) <= in_bytes:
                lo = mid
            else:
                hi = mid - 1
        smaller = _odd(lo, 0) if lo > 2 else lo
        merged = {**mapping, **{a: smaller for a in others}}
        if smaller >= 1 and _input_bytes(base, merged) <= in_bytes:
            return merged, other, smaller
    return None


def _try_variant(ctx: VerifyContext, base: Inputs, mapping: dict[Axis, int], label: str,
                 max_elements: int, stats: dict[str, float] | None = None,
                 probe: _CpuProbe | None = None) -> str | CheckResult:
    """'rejected' (the reference raises at these sizes, or its CPU copy does), a line for the evidence, or the
    failure. ``stats`` receives the seconds the two calls took and the bytes of the reference's outputs."""
    import time

    gen = torch.Generator(device=ctx.device).manual_seed(ctx.seed())
    variant = _resize_inputs(base, mapping, gen)
    if sum(x.numel() for x in variant if isinstance(x, torch.Tensor)) > max_elements:
        return "rejected"
    if probe is not None and probe.accepts(variant) is False:
        return "rejected"
    began = time.perf_counter()
    try:
        with preserved_state(ctx.ref):
            ref_out = run(ctx.ref, clone_inputs(variant))
        sync(ctx.device)
    except Exception:  # noqa: BLE001 — this size is fixed by the model (weights): not a free dimension
        return "rejected"
    ref_seconds = time.perf_counter() - began
    try:
        with preserved_state(ctx.cand):
            out = run(ctx.cand, clone_inputs(variant))
        sync(ctx.device)
    except Exception as exc:  # noqa: BLE001
        return f"{label}: candidate raised {type(exc).__name__} (specialised, but not wrong)"
    if stats is not None:
        stats["seconds"] = time.perf_counter() - began
        stats["ref_seconds"] = ref_seconds
        stats["out_bytes"] = float(sum(t.numel() * t.element_size() for t in tensors(ref_out)))
    # The tightened atol when the problem's own would pass a trivial output (tolerance_sanity).
    c = judged_compare(ctx, variant, out, ref_out, min(ctx.atol, ctx.notes.get("tight_atol", ctx.atol)))
    if not c.ok:
        return failed("extra_shapes", f"sizes {label} (the reference accepts them): {c.message} — code "
                      "specialised to the benchmark's shapes", "incorrect")
    return f"{label}: ok"


def _buffers_moved(model: torch.nn.Module, before: dict[str, torch.Tensor]) -> bool:
    """Whether a buffer of `model` no longer holds the values of `before` (buffer_snapshot)."""
    now = dict(model.named_buffers())
    return any(name in now and not bitwise_equal(now[name], saved) for name, saved in before.items())


def _rewritten(inputs: Inputs, pristine: Inputs | None = None) -> None:
    """Each tensor of the set written in place with its own values, as the timing's refill writes fresh ones; with
    the set as it was made when the forward writes its inputs (`x.add_(y)`), which calls before changed."""
    with torch.no_grad():
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                x.copy_(x if pristine is None else pristine[i])


def _tensor_versions(inputs: Inputs) -> list[int]:
    return [x._version for x in inputs if isinstance(x, torch.Tensor)]


def _timed_like_call(ctx: VerifyContext, inputs: Inputs, sharing: Any, answer: HeldAnswer, flush: Any, events: Any,
                     judged_inputs: Any, precise: bool = False) -> tuple[str | None, Any]:
    """One call of the timing-like loop; why its output is wrong, or None; and the output. A sampled answer that
    agrees lets the call pass; one that does not is made whole again before anything is charged."""
    from ..timed_inputs import foreign_outputs, overlapping_outputs

    if flush is not None and events is not None:
        flush.zero_()
        events[0].record()
        out = run(ctx.cand, inputs)
        events[1].record()
        events[1].synchronize()
    else:
        out = run(ctx.cand, inputs)
    sync(ctx.device)
    foreign = foreign_outputs(out)  # a lazy object would compute when the comparison reads it
    if foreign:
        return f"returned {foreign}, not a plain torch.Tensor", None
    overlap = overlapping_outputs(out, sharing)  # right values, never written out
    if overlap:
        return overlap, out
    if answer.whole is None:
        pairs = answer.sampled_pairs(out)
        if pairs is not None and compare(tuple(pairs[0]), tuple(pairs[1]), ctx.atol, ctx.rtol).ok and not (
                precise and _less_precise(ctx, pairs[0], pairs[1])):
            return None, out
    ref = answer.whole if answer.whole is not None else answer.remake()
    c = judged_compare(ctx, judged_inputs, out, ref)  # outside the timed span
    if c.ok and precise:
        lower = _less_precise(ctx, out, ref)
        if lower:
            return lower, out
    return None if c.ok else c.message, out


def _less_precise(ctx: VerifyContext, out: Any, ref: Any) -> str | None:
    """Why an output of get_inputs() values is further from the reference than the precision check's rule allows
    (the bounds `precision` left in the notes, compare.timed_precision_bound), or None."""
    from ..compare import error_stats

    bounds = ctx.notes.get("timed_precision") or {}
    for i, (o, r) in enumerate(zip(tensors(out), tensors(ref))):
        bound = bounds.get(i)
        if bound is None or not r.is_floating_point() or o.shape != r.shape or o.dtype != r.dtype:
            continue
        rel = error_stats(o, r).rel_l2
        if rel is not None and math.isfinite(rel) and rel > bound:
            return (f"output {i}: rel L2 err vs the reference {rel:.3g}, above {bound:.3g} — the precision check's "
                    "bound on fresh tensors: computed in lower precision when called repeatedly")
    return None


def check_timed_outputs(ctx: VerifyContext, pool_size: int | None = None, iters: int = 32) -> CheckResult:
    """A timing-like loop (warm-up, rotating pool of fresh inputs, events and L2 writes on CUDA), every
    output kept and compared afterwards: a candidate that behaves differently once it is being timed.

    The pool rotates as the timing's does (4 sets, 2 for large problems: timed_inputs.pool_size), each set
    written in place before its call (its version counter moves, as the timing's refills move it) with the
    collector paused (as the timing pauses it). Only the candidate's sets and the reference's outputs are held;
    inputs for a float64 judgement of a miss are made again from their seed (get_inputs() is a function of torch's
    seed, as the reference process assumes), so the check holds about the pool's inputs and outputs once.

    One more set joins the rotation when input_distribution judged the candidate right on it on fresh tensors: its
    last variant off the benchmark's distribution (rows at scales 1e-2..1e2). A path taken only when timed then
    meets those values too (red team round 8, adv_timed_path_unshifted: the unshifted softmax only on inputs written
    in place, exact on get_inputs()' rows, NaN on rows at 1e2, the shifted one on fresh tensors)."""
    from ..timed_inputs import internal_overlaps, pool_size as timing_pool_size
    from ..timing import gc_paused

    from .budget import Budget, nbytes

    seeds: list[int | None] = [ctx.seed()]
    cand_pool = [ctx.make_inputs(seeds[0])]
    variant = ctx.notes.get("timed_variant")
    size = pool_size or timing_pool_size(cand_pool[0])
    in_bytes = nbytes(cand_pool[0])
    allowance = Budget.for_problem(ctx.device, cand_pool[0], ctx.ref).allowance
    if pool_size is None:
        # No more sets than the check budget holds beside two kept outputs (each set counted with the reference's
        # answer for it, about as many bytes, while that fits; see sampled below), two in the rotation at least —
        # the variant, when there is one, is the second. Four sets of a large problem were the check's peak.
        least = 1 if variant is not None else 2
        while size > least and (size + (variant is not None) + 2) * in_bytes > allowance:
            size -= 1
    seeds += [ctx.seed() for _ in range(size - 1)]
    cand_pool += [ctx.make_inputs(s) for s in seeds[1:]]
    if variant is not None:
        seeds.append(None)
        cand_pool.append(variant[1]())
        size += 1

    def remade(k: int) -> Inputs:
        """Set k as it was made: get_inputs() under its seed, or the variant made again."""
        return ctx.make_inputs(seeds[k]) if seeds[k] is not None else variant[1]()

    refs: list[HeldAnswer] = []  # before any candidate call
    sharing = []  # how the reference's own outputs share memory, before the copy (a clone materialises an expanded view)
    writes_inputs = False   # the reference writes its inputs
    aliases_inputs = False  # the reference returns (views of) its inputs: so may the candidate, set after set
    sampled = False  # the reference's answers held as samples (HeldAnswer): the whole ones do not fit beside the pool
    start = buffer_snapshot(ctx.ref)
    for k, p in enumerate(cand_pool):
        args = clone_inputs(p)
        versions = _tensor_versions(args)
        raw = run(ctx.ref, args)
        writes_inputs = writes_inputs or _tensor_versions(args) != versions
        aliases_inputs = aliases_inputs or any(_overlaps(_storage_span(o), _storage_span(a)) for o in tensors(raw)
                                               for a in args if isinstance(a, torch.Tensor))
        sharing.append(internal_overlaps(raw))
        if k == 0:
            out_bytes = max(1, nbytes(raw))
            sampled = pool_size is None and size * (in_bytes + out_bytes) + 2 * out_bytes > allowance
        del args
        refs.append(HeldAnswer.keep(raw, sampled, ctx.rng,
                                    lambda k=k: detached_copy(run(ctx.ref, clone_inputs(remade(k))))))
        del raw
    # A reference whose forward writes its buffers (an EMA, spectral_norm's power iteration in training mode) answers
    # by its call history: the candidate's 25th call compared with the reference's 5th failed an honest copy of it
    # (false-flag sweep, spectral_norm on rows at 1e2). Its buffers are put back as they were before these calls,
    # and each call of the loop is judged against the reference's call at the same point of its own history.
    follows_history = _buffers_moved(ctx.ref, start)
    if follows_history:
        restore_buffers(ctx.ref, start)
    # A reference that writes its inputs answers each call from the set as it was made: so is the candidate asked
    # (the sets made again from their seeds where copies do not fit).
    held_now = nbytes(cand_pool) + sum(nbytes(r.whole) for r in refs if r.whole is not None)
    copies = nbytes(cand_pool)
    budget = Budget.for_problem(ctx.device, cand_pool[0], ctx.ref)
    pristine = None
    if writes_inputs and budget.fits(held_now + copies, held_now):
        pristine = [clone_inputs(p) for p in cand_pool]
        held_now += copies

    def pristine_set(k: int) -> Inputs | None:
        if not writes_inputs:
            return None
        return pristine[k] if pristine is not None else remade(k)

    # Inputs left as they were, on this path too (red team round 10, adv_input_scratch_versioned: its input used as
    # scratch whenever it had been written in place before — every tensor a pipeline fills with copy_ — while
    # input_mutation hands fresh tensors only): each set as it was before its call, kept while the reference does not
    # write its own. And every output in storage of its own, across the whole loop (a ring of more kept buffers than
    # output_aliasing's few held calls: adv_output_ring6): outputs are held while the check budget allows.
    # The copies are held only where the check budget allows them beside the pool (a 6 GB input's pool is not
    # cloned); the sampled timed pairs still compare inputs with what they were given.
    before = ([clone_inputs(p) for p in cand_pool] if not writes_inputs and budget.fits(held_now + copies, held_now)
              else None)
    if before is not None:
        held_now += copies
    hold = max(2, min(iters, (budget.allowance - held_now) // out_bytes))
    held: list[tuple[int, list[torch.Tensor]]] = []
    flush = None
    events = None
    if ctx.device.type == "cuda":
        flush = torch.empty(64 << 20, dtype=torch.uint8, device=ctx.device)
        events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
    bad = []
    with gc_paused():
        for i in range(iters):
            k = i % size
            _rewritten(cand_pool[k], pristine_set(k))
            answer = refs[k]
            if follows_history:  # the reference's answer at this point of its own history, held for this call only
                made = pristine_set(k) or (before[k] if before is not None else cand_pool[k])
                answer = HeldAnswer.keep(run(ctx.ref, clone_inputs(made)), False, ctx.rng, lambda: None)
                if not sampled:
                    refs[k] = answer
            miss, out = _timed_like_call(ctx, cand_pool[k], sharing[k], answer, flush, events,
                                         (lambda s=seeds[k]: ctx.make_inputs(s)) if seeds[k] is not None
                                         else variant[1], precise=seeds[k] is not None)
            if miss is None and before is not None:
                written = [j for j, (x, b) in enumerate(zip(cand_pool[k], before[k]))
                           if isinstance(x, torch.Tensor) and not same_values(x, b)]
                if written:
                    miss = (f"the call wrote its input(s) {written} (the reference leaves its own as they are; fresh "
                            "tensors were left alone)")
            if miss is None and out is not None and not aliases_inputs:
                outs = [o for o in tensors(out) if type(o) is torch.Tensor]
                again = [(j, n) for j, kept in held for n, (a, b) in enumerate(zip(kept, outs))
                         if _overlaps(_storage_span(a), _storage_span(b))]
                if again:
                    j, n = again[0]
                    miss = (f"output {n} is the storage iteration {j}'s output still holds (a kept buffer handed out "
                            "again: an earlier result changes under the caller)")
                held.append((i, outs))
                del held[:-hold]
            del out
            if miss is not None:
                bad.append((i, miss if seeds[k] is not None else f"{variant[0]} inputs: {miss}"))
    if bad:
        first_bad, message = bad[0]
        cheat = ctx.notes.get("trials_passed", True)
        return failed("timed_outputs", f"{len(bad)}/{iters} outputs of the timing-like loop are wrong, first at "
                      f"iteration {first_bad}: {message}"
                      + (" — correct while checked, wrong once called repeatedly" if cheat else ""),
                      "cheating" if cheat else "incorrect")
    how = (f" (the reference's answers held at {held_answer.SAMPLE_ELEMENTS} sampled positions per output, made whole "
           "again on a miss: the whole answers do not fit the check budget beside the pool)" if sampled else "")
    return passed("timed_outputs", f"{iters} outputs of a timing-like loop over {size} rotating input sets "
                                   f"all correct{how}")
