"""The pass mark and the error measures, on hand-made tensors whose answers are known."""

from __future__ import annotations

import math

import pytest
import torch

from kforge_worker.compare import (
    OutputStructureError,
    compare_output,
    count_not_close,
    default_tolerance,
    error_stats,
    flatten_outputs,
)


def test_tolerance_follows_kernelbench_marks() -> None:
    assert default_tolerance([torch.float32]) == 1e-4
    assert default_tolerance([torch.float16]) == 1e-2
    assert default_tolerance([torch.float32, torch.bfloat16]) == 1e-2
    assert default_tolerance([torch.int64]) == 1e-4


def test_flatten_outputs_walks_tuples_and_lists() -> None:
    a, b, c = torch.zeros(2), torch.ones(3), torch.full((1,), 2.0)
    flat = flatten_outputs((a, [b, c]))
    assert [t.shape[0] for t in flat] == [2, 3, 1]
    assert flatten_outputs(1.5)[0].item() == 1.5
    with pytest.raises(OutputStructureError, match="NoneType"):
        flatten_outputs((a, None))


def test_error_stats_are_exact_on_known_differences() -> None:
    ref = torch.tensor([3.0, 4.0, 0.0])
    out = torch.tensor([3.0, 4.5, 0.0])
    stats = error_stats(out, ref)
    assert stats.max_abs == pytest.approx(0.5)
    assert stats.rel_l2 == pytest.approx(0.5 / 5.0)
    assert stats.worst_index == 1


def test_error_stats_chunking_matches_a_direct_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    import kforge_worker.compare as compare

    monkeypatch.setattr(compare, "CHUNK", 7)  # force many chunks on a small tensor
    torch.manual_seed(1)
    ref = torch.randn(5, 11)
    out = ref + 1e-3 * torch.randn(5, 11)
    stats = compare.error_stats(out, ref)
    diff = (out.double() - ref.double()).abs()
    assert stats.max_abs == pytest.approx(diff.max().item())
    assert stats.rel_l2 == pytest.approx((diff.norm() / ref.double().norm()).item())
    assert stats.worst_index == int(diff.argmax())


def test_count_not_close_agrees_with_torch_allclose() -> None:
    torch.manual_seed(0)
    ref = torch.randn(1000)
    for scale in (1e-6, 5e-5, 2e-4, 1e-2):
        out = ref + scale * torch.randn(1000)
        bad, non_finite = count_not_close(out, ref, 1e-4, 1e-4)
        assert (bad == 0) == torch.allclose(out, ref, atol=1e-4, rtol=1e-4)
        assert non_finite == 0


def test_reference_rounding_is_not_charged_to_a_candidate_as_accurate_as_it() -> None:
    """A noisy reference (TF32-like error vs float64): a candidate closer to float64 than it, or as noisy but
    independently so, passes where it is outside the allclose band; an element off by far more than the
    reference's worst error does not, and NaN never passes."""
    torch.manual_seed(1)
    truth = torch.randn(100_000, dtype=torch.float64)
    ref = (truth + 3e-4 * torch.randn_like(truth)).float()  # the reference's own rounding
    close = (truth + 1e-6 * torch.randn_like(truth)).float()  # nearer the truth than the reference
    assert not torch.allclose(close, ref, atol=1e-4, rtol=1e-4)
    bad, _ = count_not_close(close, ref, 1e-4, 1e-4, truth)
    assert bad == 0
    assert compare_output(0, close, ref, truth, 1e-4, 1e-4).passed
    assert not compare_output(0, close, ref, None, 1e-4, 1e-4).passed  # without float64: KernelBench's rule
    as_noisy = (truth + 3e-4 * torch.randn_like(truth)).float()  # another algorithm, the same rounding
    assert count_not_close(as_noisy, ref, 1e-4, 1e-4, truth)[0] == 0
    wrong = ref.clone()
    wrong[123] += 1e-2  # one element off by far more than the reference's error
    bad, _ = count_not_close(wrong, ref, 1e-4, 1e-4, truth)
    assert bad == 1
    nan = close.clone()
    nan[7] = float("nan")
    bad, non_finite = count_not_close(nan, ref, 1e-4, 1e-4, truth)
    assert bad >= 1 and non_finite == 1


def test_a_candidate_as_accurate_as_a_chaotic_reference_passes_though_its_worst_element_is_a_little_worse() -> None:
    """A reference far from float64 everywhere (a deep network in training mode: 3e-2): an equally accurate candidate's
    worst element is a new sample of the same maximum and may exceed the reference's by more than the band; it passes.
    One element off by three times the reference's worst does not."""
    torch.manual_seed(2)
    truth = torch.randn(10_000, dtype=torch.float64)
    ref = (truth + 1e-2 * torch.randn_like(truth)).float()
    ref_worst = float((ref.double() - truth).abs().max())
    cand = ref.clone()
    cand[99] = float(truth[99] + 1.15 * ref_worst)  # 15% past the reference's worst: far beyond the 1e-4 band
    assert count_not_close(cand, ref, 1e-4, 1e-4, truth)[0] == 0
    far = ref.clone()
    far[99] = float(truth[99] + 3 * ref_worst)
    assert count_not_close(far, ref, 1e-4, 1e-4, truth)[0] == 1


def test_nan_never_passes() -> None:
    ref = torch.ones(4)
    out = ref.clone()
    out[2] = float("nan")
    verdict = compare_output(0, out, ref, None, 1e-2, 1e-2)
    assert not verdict.passed and not verdict.structural
    assert verdict.json["nonFinite"] == 1
    assert "non-finite" in verdict.message


def test_non_finite_passes_only_where_the_reference_is_the_same_non_finite_value() -> None:
    """A reference that is NaN or infinite by its own definition (log of a negative input) is matched by the same
    value: counting it against the candidate failed every answer, the identity too, and the reference process's
    copy disagreed with itself (reference_isolation: cheating). Anywhere else a non-finite value never passes."""
    ref = torch.tensor([1.0, math.inf, math.nan, -math.inf])
    same = compare_output(0, ref.clone(), ref, None, 1e-4, 1e-4)
    assert same.passed and same.json["nonFinite"] == 0
    for wrong in ([math.inf, math.inf, math.nan, -math.inf],  # inf where the reference is finite
                  [1.0, -math.inf, math.nan, -math.inf],  # the other infinity
                  [1.0, math.nan, math.nan, -math.inf],  # NaN where the reference is inf
                  [1.0, math.inf, 0.0, -math.inf]):  # a finite value where the reference is NaN
        verdict = compare_output(0, torch.tensor(wrong), ref, None, 1e-4, 1e-4)
        assert not verdict.passed, wrong
    assert error_stats(ref.clone(), ref).max_abs == 0.0


def test_shape_and_dtype_mismatches_are_structural() -> None:
    ref = torch.zeros(2, 3)
    shape = compare_output(0, torch.zeros(3, 2), ref, None, 1e-4, 1e-4)
    assert shape.structural and not shape.passed
    assert "shape [3, 2] vs reference [2, 3]" in shape.message
    assert shape.json["vsRef"] == {"maxAbs": None, "relL2": None}
    dtype = compare_output(0, torch.zeros(2, 3, dtype=torch.float64), ref, None, 1e-4, 1e-4)
    assert dtype.structural and "dtype float64 vs reference float32" in dtype.message
    assert dtype.json["vsRef"]["maxAbs"] == 0.0  # same shape: the numbers are still reported


def test_failure_message_names_count_worst_element_and_fp64_view() -> None:
    ref = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    out = ref.clone()
    out[1, 2] += 0.5
    ref64 = ref.double()
    verdict = compare_output(0, out, ref, ref64, 1e-4, 1e-4)
    assert not verdict.passed
    assert "max abs err 0.5 > atol+rtol·|ref|" in verdict.message
    assert "at 1 of 8 elements" in verdict.message
    assert "worst at [1, 2]: 6.5 vs 6" in verdict.message
    assert verdict.json["candVsFp64"]["maxAbs"] == pytest.approx(0.5)
    assert verdict.json["refVsFp64"]["maxAbs"] == 0.0


def test_reference_vs_fp64_shows_half_precision_rounding() -> None:
    torch.manual_seed(0)
    x64 = torch.rand(256, dtype=torch.float64)
    ref = (x64.half() * 3).float().half()
    verdict = compare_output(0, ref.clone(), ref, x64.half().double() * 3, 1e-2, 1e-2)
    assert verdict.passed
    rel = verdict.json["refVsFp64"]["relL2"]
    assert 1e-5 < rel < 1e-2  # fp16 rounding is visible, and small
    assert verdict.json["candVsFp64"] == verdict.json["refVsFp64"]


def test_comparisons_without_float64_allow_a_multiple_of_the_reference_noise_seen_in_trials(monkeypatch) -> None:
    """After the trials noted the reference's worst error vs float64, a comparison without float64 (the
    checks, the timed spot checks) passes an element within NOISE_MULTIPLE times that plus the band, and no further."""
    import kforge_worker.compare as cmp
    from kforge_worker.checks.context import compare

    monkeypatch.setattr(cmp, "_reference_noise", 0.0)
    ref = torch.zeros(1000)
    out = ref.clone()
    out[5] = 5e-4
    assert count_not_close(out, ref, 1e-4, 1e-4)[0] == 1
    assert not compare(out, ref, 1e-4, 1e-4).ok
    cmp.note_reference_noise(3e-4)
    cmp.note_reference_noise(float("inf"))  # a non-finite error grants nothing
    assert cmp.reference_noise() == 3e-4
    assert count_not_close(out, ref, 1e-4, 1e-4)[0] == 0
    assert compare(out, ref, 1e-4, 1e-4).ok
    out[6] = cmp.NOISE_MULTIPLE * 3e-4 + 2e-4  # beyond NOISE_MULTIPLE * 3e-4 + 1e-4
    assert count_not_close(out, ref, 1e-4, 1e-4)[0] == 1
    assert not compare(out, ref, 1e-4, 1e-4).ok


def test_reference_worst_error_of_a_scalar_output() -> None:
    """A loss is a 0-d output: the reference's error against float64 is measured on it like on any other."""
    from kforge_worker.compare import reference_worst_error

    ref64 = torch.tensor(2.0, dtype=torch.float64)
    assert reference_worst_error(torch.tensor(2.5), ref64) == 0.5
    assert count_not_close(torch.tensor(2.0), torch.tensor(2.5), 1e-4, 1e-4, ref64)[0] == 0
