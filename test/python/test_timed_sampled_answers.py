"""The timing-like loop on a problem whose whole answers do not fit the check budget beside its pool (issue 17): the
reference's answers are held at sampled positions, a timed path that is wrong is still caught, an honest one passes,
and a sampled answer's whole is made again exactly."""

from __future__ import annotations

import random

import pytest
import torch

from kforge_worker.checks import context, held_answer
from kforge_worker.checks.held_answer import HeldAnswer
from kforge_worker.checks.input_checks import check_timed_outputs
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport


class Softmax(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class SoftmaxStaleWhenTimed(torch.nn.Module):
    """Right on fresh tensors; on a set written in place (the timing's refills), the answer of its first call."""

    def __init__(self) -> None:
        super().__init__()
        self.kept = None

    def forward(self, x):
        if x._version > 0 and self.kept is not None:
            return self.kept.clone()
        out = torch.softmax(x, dim=1)
        self.kept = out.clone()
        return out


class SoftmaxHalfRowsWhenTimed(torch.nn.Module):
    """Skips the work on the second half of the rows when its inputs were written in place."""

    def forward(self, x):
        out = torch.softmax(x, dim=1)
        if x._version > 0:
            out[x.shape[0] // 2 :] = 0.0
        return out


def _make_inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(64, 512, generator=g)]


def _ctx(cand: torch.nn.Module) -> context.VerifyContext:
    return context.VerifyContext(ref=Softmax(), cand=cand, make_inputs=_make_inputs, device=torch.device("cpu"),
                                 atol=1e-5, rtol=1e-5, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(11))


@pytest.fixture
def tight_budget(monkeypatch):
    """A check budget of three input sets (one input set is 128 kB here) and samples of 256 positions: the whole
    answers of a two-set pool do not fit beside it."""
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", str(3 * 64 * 512 * 4))
    monkeypatch.setattr(held_answer, "SAMPLE_ELEMENTS", 256)


def test_an_honest_candidate_passes_on_sampled_answers(tight_budget):
    result = check_timed_outputs(_ctx(Softmax()), iters=8)
    assert result.outcome == "pass", result.evidence
    assert "sampled" in result.evidence


@pytest.mark.parametrize("cand", [SoftmaxStaleWhenTimed, SoftmaxHalfRowsWhenTimed])
def test_a_timed_path_that_is_wrong_is_caught_on_sampled_answers(tight_budget, cand):
    result = check_timed_outputs(_ctx(cand()), iters=8)
    assert result.outcome == "fail" and result.fail_verdict == "cheating", result.evidence


def test_a_sampled_answer_is_made_whole_again_exactly():
    torch.manual_seed(0)
    out = torch.randn(3000, 700)
    calls = []

    def remake():
        calls.append(1)
        return out.clone()

    held = HeldAnswer.keep(out, True, random.Random(3), remake)
    assert held.whole is None
    mine, theirs = held.sampled_pairs(out.clone())
    assert all(torch.equal(a, b) for a, b in zip(mine, theirs))
    wrong = out.clone()
    wrong[1500:] = 0.0  # half the rows skipped: a sample of 1M positions of 2.1M meets them
    mine, theirs = held.sampled_pairs(wrong)
    assert not all(torch.equal(a, b) for a, b in zip(mine, theirs))
    assert held.sampled_pairs(out[:10]) is None  # another shape: the whole answer decides
    assert torch.equal(held.remake(), out) and calls == [1]
