"""replay_cache: a candidate that gives back an earlier output for new inputs is a replay only where the
reference's answers for the two input sets differ beyond the tolerance. A loss rounded to bf16 near a rounding
boundary differs bitwise between two draws in the reference while an honest candidate rounds both to one value."""

from __future__ import annotations

import random

import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.input_checks import check_replay
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport

BOUNDARY = 10.03125  # halfway between the bf16 values 10.0 and 10.0625


def _context(ref: nn.Module, cand: nn.Module, seeds: list[int]) -> context.VerifyContext:
    def make_inputs(seed: int):
        return [torch.randn(4096, generator=torch.Generator().manual_seed(seed))]

    ctx = context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                atol=0.1, rtol=0.0, scan=ScanReport("c.py", frozenset()),
                                extensions=ExtensionRecorder(), rng=random.Random(5))
    draws = iter(seeds)
    ctx.seed = lambda: next(draws)  # type: ignore[method-assign]
    return ctx


class _BoundaryLoss(nn.Module):
    """A scalar loss at a bf16 rounding boundary: the sign of the inputs' mean picks 10.0 or 10.0625."""

    def forward(self, x):
        return (x.mean() * 1e-3 + BOUNDARY).to(torch.bfloat16)


class _BoundaryLossRoundedLow(nn.Module):
    """The same loss a hair lower (another summation order): always 10.0, within the tolerance of both."""

    def forward(self, x):
        return (x.double().mean() * 1e-3 + BOUNDARY - 1e-3).to(torch.bfloat16)


class _PointerCache(nn.Module):
    """Gives back its first answer for any input in the storage it has seen."""

    def __init__(self):
        super().__init__()
        self.cache: dict[int, torch.Tensor] = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = (x.mean() * 1e-3 + BOUNDARY).to(torch.bfloat16) * 0 + (x * 2).sum()
        return self.cache[key]


class _Sum(nn.Module):
    def forward(self, x):
        return (x * 2).sum()


def _seeds_straddling() -> list[int]:
    """Two seeds whose inputs' means have opposite signs: the reference's bf16 answers differ by one ulp."""
    mean = lambda s: float(torch.randn(4096, generator=torch.Generator().manual_seed(s)).mean())  # noqa: E731
    first = 1
    second = next(s for s in range(2, 100) if (mean(s) > 0) != (mean(first) > 0))
    return [first, second]


def test_an_honest_low_resolution_answer_repeated_across_inputs_is_no_replay() -> None:
    seeds = _seeds_straddling()
    ref, cand = _BoundaryLoss(), _BoundaryLossRoundedLow()
    answers = {float(ref(torch.randn(4096, generator=torch.Generator().manual_seed(s)))) for s in seeds}
    assert answers == {10.0, 10.0625}, "the reference's own answers straddle the boundary"
    results = {r.name: r for r in check_replay(_context(ref, cand, seeds))}
    assert results["replay_cache"].outcome == "pass", results["replay_cache"].evidence


def test_an_answer_kept_for_the_storage_is_still_a_replay() -> None:
    results = {r.name: r for r in check_replay(_context(_Sum(), _PointerCache(), [1, 2]))}
    assert results["replay_cache"].outcome == "fail", results["replay_cache"].evidence
    assert "same tensors gave back the previous output" in results["replay_cache"].evidence
