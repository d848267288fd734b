"""Timing statistics and the interleaved timing loop, on synthetic samples and a fake clock."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kforge_worker.request import TimingOptions
from kforge_worker.stats import bootstrap_speedup_ci, relative_half_width, speedup, summarize
from kforge_worker.optimize_bench import _median_rotating
from kforge_worker.timing import CpuClock, clock_for, gc_paused, measure_interleaved


def test_summarize_reports_exact_order_statistics() -> None:
    stats = summarize([9, 1, 5, 3, 7, 2, 8, 4, 6])
    assert stats["n"] == 9
    assert stats["medianMs"] == 5
    assert stats["meanMs"] == 5
    assert (stats["minMs"], stats["maxMs"]) == (1, 9)
    assert (stats["p25Ms"], stats["p75Ms"]) == (3, 7)
    assert stats["stdMs"] == pytest.approx(math.sqrt(7.5))
    assert stats["samplesMs"] == [9, 1, 5, 3, 7, 2, 8, 4, 6]  # in measurement order


def test_summarize_single_sample_and_empty() -> None:
    assert summarize([2.5])["stdMs"] == 0.0
    with pytest.raises(ValueError):
        summarize([])


def test_speedup_is_reference_median_over_candidate_median() -> None:
    assert speedup([4, 4, 100], [2, 2, 2]) == 2.0  # medians, so the outlier does not count


def test_bootstrap_ci_brackets_the_true_ratio_and_is_reproducible() -> None:
    rng = np.random.default_rng(7)
    cand = 1.0 + 0.05 * rng.standard_normal(200)
    ref = 2.0 * (1.0 + 0.05 * rng.standard_normal(200))
    low, high = bootstrap_speedup_ci(ref, cand)
    assert low < speedup(ref, cand) < high
    assert low < 2.0 < high
    assert high - low < 0.1
    assert bootstrap_speedup_ci(ref, cand) == (low, high)


def test_bootstrap_ci_narrows_with_more_samples() -> None:
    rng = np.random.default_rng(3)
    widths = []
    for n in (20, 500):
        ref = 1.0 + 0.1 * rng.standard_normal(n)
        cand = 1.0 + 0.1 * rng.standard_normal(n)
        ci = bootstrap_speedup_ci(ref, cand)
        widths.append(relative_half_width(ci, speedup(ref, cand)))
    assert widths[1] < widths[0] / 2


def test_bootstrap_rejects_unpaired_samples() -> None:
    with pytest.raises(ValueError):
        bootstrap_speedup_ci([1, 2, 3], [1, 2])


class FakeClock:
    """Returns scripted durations and records which side was timed, in order."""

    method = "fake"
    flush_bytes = 123

    def __init__(self, ref_ms: Callable[[int], float], cand_ms: Callable[[int], float]) -> None:
        self.calls: list[str] = []
        self.ref_ms, self.cand_ms = ref_ms, cand_ms

    def time_ms(self, fn: Callable[[], Any]) -> float:
        side = fn()
        self.calls.append(side)
        i = sum(1 for c in self.calls if c == side) - 1
        return self.ref_ms(i) if side == "ref" else self.cand_ms(i)


def options(**overrides: Any) -> TimingOptions:
    base = dict(enabled=True, warmup_iters=3, min_iters=10, max_iters=60, budget_seconds=100.0, target_relative_ci=1e-9)
    base.update(overrides)
    return TimingOptions(**base)


def test_loop_interleaves_warms_up_and_respects_max_iters() -> None:
    warm: list[str] = []
    clock = FakeClock(lambda i: 2.0 + 0.01 * (i % 5), lambda i: 1.0 + 0.01 * (i % 7))

    def ref() -> str:
        warm.append("ref")
        return "ref"

    def cand() -> str:
        warm.append("cand")
        return "cand"

    timing = measure_interleaved(ref, cand, options(), clock)
    # Warm-up pairs (untimed), then timed ones; the sides take turns going first (ABBA), pairs counted
    # from the first warm-up pair.
    assert warm[:6] == ["ref", "cand", "cand", "ref", "ref", "cand"]
    assert clock.calls == ["cand", "ref", "ref", "cand"] * 30
    assert timing["ref"]["n"] == timing["cand"]["n"] == 60
    assert timing["speedup"] == pytest.approx(timing["ref"]["medianMs"] / timing["cand"]["medianMs"])
    low, high = timing["speedupCi"]
    assert low <= timing["speedup"] <= high
    assert timing["l2FlushBytes"] == 123
    assert "60 pairs" in timing["method"] and "maxIters" in timing["method"]


def test_loop_stops_early_once_the_ci_is_tight() -> None:
    clock = FakeClock(lambda i: 2.0 + 1e-4 * (i % 3), lambda i: 1.0 + 1e-4 * (i % 2))
    timing = measure_interleaved(lambda: "ref", lambda: "cand", options(target_relative_ci=0.01, max_iters=500), clock)
    assert timing["ref"]["n"] == 10  # minIters, the first point the CI is consulted
    assert "CI within" in timing["method"]


def test_loop_keeps_going_while_noisy_and_stops_on_budget() -> None:
    rng = np.random.default_rng(0)
    noise = rng.uniform(0.5, 2.0, size=10_000)
    ticks = iter(range(10_000))
    timing = measure_interleaved(
        lambda: "ref",
        lambda: "cand",
        options(target_relative_ci=1e-6, budget_seconds=25.0, max_iters=10_000),
        FakeClock(lambda i: float(noise[i]), lambda i: float(noise[-i - 1])),
        now=lambda: float(next(ticks)),  # one "second" per pair
    )
    assert timing["ref"]["n"] == 25
    assert "budget" in timing["method"]


def test_min_iters_wins_over_a_smaller_max_iters() -> None:
    clock = FakeClock(lambda i: 1.0, lambda i: 1.0)
    timing = measure_interleaved(lambda: "ref", lambda: "cand", options(min_iters=20, max_iters=5), clock)
    assert timing["ref"]["n"] == 20
    assert timing["speedup"] == 1.0


def test_gc_is_paused_while_timing_and_its_prior_state_restored() -> None:
    seen: list[bool] = []

    def side() -> str:
        seen.append(gc.isenabled())
        return "ref"

    assert gc.isenabled()
    measure_interleaved(side, side, options(warmup_iters=0, min_iters=2, max_iters=2), FakeClock(lambda i: 1.0, lambda i: 1.0))
    assert seen and not any(seen) and gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("timed call failed")
    assert gc.isenabled()  # restored even when the block raises
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_rotating_median_takes_each_function_in_turn_rotating_the_order_with_gc_off() -> None:
    order: list[str] = []
    durations = {"eager": iter([5.0, 1.0, 3.0]), "ours": iter([2.0, 9.0, 4.0])}

    class ScriptedClock:
        method, flush_bytes = "scripted", 0

        def time_ms(self, fn: Callable[[], Any]) -> float:
            name = fn()
            order.append(name)
            assert not gc.isenabled()
            return next(durations[name])

    medians = _median_rotating(ScriptedClock(), {"eager": lambda: "eager", "ours": lambda: "ours"}, 3)
    assert order == ["eager", "ours", "ours", "eager", "eager", "ours"]  # no side always goes first
    assert medians == {"eager": 3.0, "ours": 4.0}
    assert gc.isenabled()


def test_three_sides_meet_every_order_so_none_always_follows_the_same_neighbour() -> None:
    order: list[str] = []

    class Clock:
        method, flush_bytes = "scripted", 0

        def time_ms(self, fn: Callable[[], Any]) -> float:
            order.append(fn())
            return 1.0

    _median_rotating(Clock(), {n: (lambda n=n: n) for n in ("eager", "compiled", "ours")}, 6)
    follows = [(a, b) for a, b in zip(order, order[1:])]
    before_ours = {a for a, b in follows if b == "ours"}
    assert before_ours == {"eager", "compiled"}
    assert follows.count(("compiled", "ours")) == follows.count(("eager", "ours"))


def test_clock_for_picks_perf_counter_off_the_gpu() -> None:
    import torch

    assert isinstance(clock_for(torch.device("cpu")), CpuClock)
