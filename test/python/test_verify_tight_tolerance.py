"""tolerance_sanity / tight_tolerance: where a trivial output would pass the problem's own tolerance the atol
is tightened (for tight_tolerance and extra_shapes), so zeros for small but meaningful outputs fail — but an
output that is only rounding noise (its float64 value is ~0) keeps the problem's atol: no tighter one is
resolvable, and a trivial output is as right as any there."""

from __future__ import annotations

import random

import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.output_checks import check_tight_tolerance, check_tolerance
from kforge_worker.checks.static_scan import ScanReport


def _context(ref: nn.Module, cand: nn.Module, make_inputs) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(7))


def _inputs(seed: int):
    return [torch.randn(64, 4096, generator=torch.Generator().manual_seed(seed)) * 3 + 1]


class _MeanOfNormalised(nn.Module):
    """The mean of a row-normalised tensor: exactly 0, computed in float32 as ~1e-9 of rounding noise."""

    def forward(self, x):
        y = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)
        return y.mean(dim=1)


class _MeanOfNormalisedOtherOrder(nn.Module):
    """The same in another summation order (as a fused kernel would): different noise, as close to float64."""

    def forward(self, x):
        y = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)
        return y.flip(1).reshape(64, 64, 64).sum(2).sum(1) / 4096


class _Zeros(nn.Module):
    def forward(self, x):
        return torch.zeros(x.shape[0], dtype=x.dtype)


class _SmallSignal(nn.Module):
    """Small but meaningful outputs: zeros would pass atol 1e-4."""

    def forward(self, x):
        return x[:, :8] * 1e-6


class _SmallSignalWrong(nn.Module):
    def forward(self, x):
        return x[:, 8:16] * 1e-6


def _tight(ref: nn.Module, cand: nn.Module):
    ctx = _context(ref, cand, _inputs)
    sanity = check_tolerance(ctx)
    return sanity, check_tight_tolerance(ctx)


def test_rounding_noise_outputs_keep_the_problems_atol_rather_than_an_unresolvable_one():
    sanity, tight = _tight(_MeanOfNormalised(), _MeanOfNormalisedOtherOrder())
    assert sanity.outcome == "warn" and "rounding noise" in sanity.evidence, sanity.evidence
    assert tight is None  # not tightened: another summation order is as right as PyTorch's
    # Zeros are the exact answer here: not a weak tolerance.
    sanity, tight = _tight(_MeanOfNormalised(), _Zeros())
    assert tight is None


def test_zeros_for_small_meaningful_outputs_still_fail_the_tightened_atol():
    sanity, tight = _tight(_SmallSignal(), _Zeros())
    assert sanity.outcome == "warn"
    assert tight is not None and tight.outcome == "fail" and tight.fail_verdict == "incorrect", tight.evidence
    wrong = _tight(_SmallSignal(), _SmallSignalWrong())[1]
    assert wrong is not None and wrong.outcome == "fail"
    right = _tight(_SmallSignal(), _SmallSignal())[1]
    assert right is not None and right.outcome == "pass"
