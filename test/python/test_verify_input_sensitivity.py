"""input_sensitivity: outputs must follow a 1% perturbation of the inputs. A candidate that rounds differently
from the reference (another summation order, a TF32 convolution by another algorithm) is judged against the
float64 evaluation of the perturbed inputs, within the reference's own rounding; one that skips work is not."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.input_checks import check_input_distribution, check_input_sensitivity
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport


def _context(ref: nn.Module, cand: nn.Module, atol: float, shape: tuple[int, ...] = (256, 1024),
             ref_families: frozenset[str] = frozenset()) -> context.VerifyContext:
    def make_inputs(seed: int):
        return [torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 3]

    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=atol, rtol=0.0, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(5), ref_families=ref_families)


class _Project(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1024, 512, generator=torch.Generator().manual_seed(1)))

    def forward(self, x):
        return x @ self.w


class _ProjectRoundedOnce(_Project):
    """The same product accumulated in float64 and rounded once: closer to float64 than the reference, but
    not equal to it."""

    def forward(self, x):
        return (x.double() @ self.w.double()).float()


class _ProjectSkippingABlock(_Project):
    """Leaves the last 16 input features out: a partial sum, off by far more than rounding."""

    def forward(self, x):
        return x[:, :-16] @ self.w[:-16]


def _sensitivity(candidate: type[_Project], atol: float):
    """check_input_sensitivity of `candidate` (with the reference's weights) against _Project."""
    ref = _Project()
    cand = candidate()
    cand.load_state_dict(ref.state_dict())
    return check_input_sensitivity(_context(ref, cand, atol=atol))


def test_rounding_differently_from_the_reference_passes():
    # No band at all: every element that differs from the reference's rounding is outside it.
    result = _sensitivity(_ProjectRoundedOnce, atol=0.0)
    assert result.outcome == "pass", result.evidence


def test_skipped_work_fails_even_so():
    result = _sensitivity(_ProjectSkippingABlock, atol=1e-4)
    assert result.outcome == "fail", result.evidence
    assert "perturbing" in result.evidence


class _ProjectInHalfPrecisionInputs(_Project):
    """Inputs rounded to bfloat16 before an fp32 product (as a reduced-precision convolution algorithm rounds
    its operands): ~1e-3 relative error, a hundred times the reference's, above the fp32 floor."""

    def forward(self, x):
        return x.bfloat16().float() @ self.w.bfloat16().float()


def test_precision_beyond_the_dtype_floor_fails():
    result = _sensitivity(_ProjectInHalfPrecisionInputs, atol=1e-4)
    assert result.outcome == "fail", result.evidence


def _tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 rounded to TF32's 10-bit mantissa (truncated, as a tensor-core operand load does)."""
    return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)


class _Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


class _ConvInTf32(_Conv):
    """The convolution a TF32 cuDNN algorithm computes: operands rounded to TF32, fp32 accumulation."""

    def forward(self, x):
        return nn.functional.conv2d(_tf32(x), _tf32(self.conv.weight), self.conv.bias, padding=1)


def _tf32_conv(families: frozenset[str]) -> context.VerifyContext:
    torch.manual_seed(3)
    ref, cand = _Conv(), _ConvInTf32()
    cand.load_state_dict(ref.state_dict())
    return _context(ref, cand, atol=1e-5, shape=(4, 16, 24, 24), ref_families=families)


CONV = frozenset({"conv"})


@pytest.mark.parametrize("check", [check_input_sensitivity, check_input_distribution])
def test_a_tf32_convolution_passes_where_cudnn_may_pick_one(monkeypatch, check):
    # cuDNN's TF32 switch (on by default) lets the reference's own convolution run in TF32 by another
    # algorithm; the reference on this machine happens to be exact, so its error is no bound.
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    assert check(_tf32_conv(CONV)).outcome == "pass"
    # A reference without convolutions gives TF32 no licence.
    assert check(_tf32_conv(frozenset())).outcome == "fail"


@pytest.mark.parametrize("check", [check_input_sensitivity, check_input_distribution])
def test_tf32_rounding_fails_where_nothing_allows_it(monkeypatch, check):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    for families in (CONV, frozenset()):
        assert check(_tf32_conv(families)).outcome == "fail", families


class _CubeHalf(nn.Module):
    def forward(self, x):
        return x ** 3 + 1.0


class _CubeThroughBf16(nn.Module):
    def forward(self, x):
        return (x.bfloat16() ** 3 + 1.0).half()


def _half_context(cand: nn.Module) -> context.VerifyContext:
    def make_inputs(seed: int):  # |x| above 40.3: x ** 3 overflows float16 to inf
        return [(torch.randn(64, 256, generator=torch.Generator().manual_seed(seed)) * 30).half()]

    return context.VerifyContext(ref=_CubeHalf(), cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=1e-2, rtol=1e-2, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(5))


def test_precision_is_judged_where_the_reference_itself_is_finite():
    """fp16 x ** 3 overflows to inf where float64 does not: PyTorch's own error vs float64 was inf, and the
    reference's own forward, emitted verbatim, failed `precision` ("rel L2 vs fp64 inf, PyTorch's own inf")."""
    from kforge_worker.checks.output_checks import check_precision

    honest = check_precision(_half_context(_CubeHalf()))
    assert honest.outcome == "pass", honest.evidence
    assert "not)" in honest.evidence
    lower = check_precision(_half_context(_CubeThroughBf16()))
    assert lower.outcome == "fail", lower.evidence
