"""timing_cross_check's decision, with CUDA's events and synchronisation stood in for: a gap between the event
time and the device-synchronised wall clock fails only when fresh rounds see it again (a host or GPU shared with
other work widens one round's gap; work that escapes the timed stream widens every round's)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from kforge_worker.checks import execution_checks


class _InstantEvent:
    """A CUDA event whose span is always 0 ms: all of a call's wall time is then the gap."""

    def __init__(self, enable_timing: bool = False) -> None:
        pass

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, other: "_InstantEvent") -> float:
        return 0.0


class _Escaping(nn.Module):
    """Spends `ms` of host time outside the events on the calls numbered in `slow` (all when None)."""

    def __init__(self, ms: float, slow: range | None) -> None:
        super().__init__()
        self.ms, self.slow, self.calls = ms, slow, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.slow is None or self.calls in self.slow:
            time.sleep(self.ms / 1e3)
        self.calls += 1
        return x + 1


def _check(monkeypatch: pytest.MonkeyPatch, cand: nn.Module):
    monkeypatch.setattr(torch.cuda, "Event", _InstantEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(execution_checks, "run", lambda model, args: model(*args))
    ctx = SimpleNamespace(device=torch.device("cuda"), notes={}, ref=_Escaping(0, range(0)), cand=cand,
                          seed=lambda: 0, make_inputs=lambda seed: [torch.ones(4)])
    return execution_checks.check_timing_cross(ctx, iters=5, rounds=3)


def test_a_gap_in_one_round_only_is_confirmed_away(monkeypatch: pytest.MonkeyPatch) -> None:
    # Calls 1-5 are the first round's (call 0 is the warm-up): only that round is slow.
    result = _check(monkeypatch, _Escaping(2.0, range(1, 6)))
    assert result.outcome == "pass", result.evidence
    assert "after 1 round(s) with a wider gap" in result.evidence


def test_a_gap_in_every_round_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    result = _check(monkeypatch, _Escaping(2.0, None))
    assert result.outcome == "fail", result.evidence
    assert "in each of 3 rounds" in result.evidence
