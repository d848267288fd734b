"""Fresh inputs for every timed call and the sampled check of timed outputs (timed_inputs.py, pipeline timing).

What must hold: no timed call sees the object or the values the previous call saw; the values are rewritten
in place (same storage, new version counter) outside the timed region; both sides get the same values; which
pairs are checked cannot be predicted, but late calls are still checked; a cache or switch that answers
differently when timed is `cheating`, an intermittent error is `incorrect`.
"""

from __future__ import annotations

import random

import pytest
import torch
from conftest import REPO, assert_valid, evaluate, make_request, problem

from kforge_worker.timed_inputs import FreshInputPool, OutputSampler, pool_size, refill
from kforge_worker.timing import measure_interleaved
from kforge_worker.request import TimingOptions

CORPUS = REPO / "test" / "verify"


def _pool(sets: int = 3) -> FreshInputPool:
    seeds = iter(range(1, 10_000))

    def generate(seed: int) -> list:
        g = torch.Generator().manual_seed(seed)
        return [torch.rand(8, 5, generator=g), 7]

    return FreshInputPool(generate, lambda: next(seeds), sets=sets)


def test_every_call_gets_another_object_and_values_never_seen_before() -> None:
    pool = _pool(sets=3)
    seen_values: list[torch.Tensor] = []
    last_ref = last_cand = None
    storages: dict[int, set[int]] = {}
    for _ in range(12):
        pool.advance()
        ref, cand = pool.ref_inputs(), pool.cand_inputs()
        assert ref[0] is not last_ref and cand[0] is not last_cand  # never the object of the call before
        assert torch.equal(ref[0], cand[0]) and ref[0].data_ptr() != cand[0].data_ptr()  # same values, own copies
        assert ref[1] == cand[1] == 7  # non-tensor inputs carried over
        assert not any(torch.equal(ref[0], old) for old in seen_values)  # values never repeat
        seen_values.append(ref[0].clone())
        storages.setdefault(pool.turn, set()).add(ref[0].data_ptr())
        last_ref, last_cand = ref[0], cand[0]
    # Rewritten in place: each set keeps its storage (no allocations inside the loop), and there are 3 sets.
    assert sorted(storages) == [0, 1, 2] and all(len(ptrs) == 1 for ptrs in storages.values())
    assert pool.refreshed == 12


def test_the_pool_draws_only_through_make_inputs_one_call_per_set_and_per_pair() -> None:
    """Where get_inputs() draws is make_inputs' decision (pipeline.device_generation): the pool adds no probe
    of its own, so it costs one get_inputs() call per set and one per pair, and reports what it is told."""
    calls = {"n": 0}
    seeds = iter(range(1, 100))

    def generate(seed: int) -> list:
        calls["n"] += 1
        return [torch.rand(8, 5, generator=torch.Generator().manual_seed(seed))]

    pool = FreshInputPool(generate, lambda: next(seeds), sets=3, generation="device")
    assert calls["n"] == 3
    for _ in range(5):
        pool.advance()
    assert calls["n"] == 3 + 5 and pool.refreshed == 5
    assert "(on the device)" in pool.describe()
    assert "(on the host)" in _pool().describe()


def test_a_rewrite_advances_the_version_counter_so_identity_caches_miss() -> None:
    pool = _pool(sets=2)
    pool.advance()
    x = pool.cand_inputs()[0]
    version = x._version
    pool.advance()
    pool.advance()  # back to the same set
    assert pool.cand_inputs()[0] is x and x._version > version


def test_refill_replaces_tensors_whose_layout_changed() -> None:
    dst = [torch.zeros(2, 3), torch.zeros(4)]
    src = [torch.ones(2, 3), torch.ones(5, dtype=torch.float64)]
    kept = dst[0]
    out = refill(dst, src)
    assert out[0] is kept and torch.equal(kept, src[0])
    assert out[1] is not src[1] and out[1].shape == (5,) and out[1].dtype == torch.float64


def test_pool_size_is_bounded_by_the_problem_bytes() -> None:
    small = [torch.empty(1000)]
    assert pool_size(small) == 4
    assert pool_size(small, budget_bytes=9 * 4000 - 1) == 2


def test_the_first_pairs_are_always_checked_and_late_pairs_still_are() -> None:
    sampler = OutputSampler(lambda c, r: (True, None), c=6, floor=0.15, rng=random.Random(1), now=lambda: 0.0)
    for pair in range(2000):
        sampler.after_pair(pair, None, None)
    pairs = [c.pair for c in sampler.checks]
    assert pairs[:6] == [0, 1, 2, 3, 4, 5]
    late = [p for p in pairs if p >= 1000]
    assert 100 < len(late) < 200  # ~15% of the second half
    assert sampler.check(warmup_pairs=5)["outcome"] == "pass"


def test_the_floor_is_dropped_while_comparing_costs_too_much() -> None:
    clock = {"t": 0.0}

    def slow_compare(c, r):
        clock["t"] += 1.0  # each comparison costs as much as the whole loop so far
        return True, None

    sampler = OutputSampler(slow_compare, c=2, floor=0.5, rng=random.Random(3), now=lambda: clock["t"])
    for pair in range(400):
        clock["t"] += 0.01
        sampler.after_pair(pair, None, None)
    assert len(sampler.checks) < 30  # ~2·ln(400) plus what the floor bought while affordable, not ~200


def test_a_switch_that_stays_on_is_cheating_and_a_rare_error_is_incorrect() -> None:
    # A still clock: comparing never looks costly, so the floor (every pair) holds whatever the machine's load.
    still = lambda: 0.0  # noqa: E731
    switch = OutputSampler(lambda c, r: (c == r, None if c == r else "output 0: off"), floor=1.0, rng=random.Random(0),
                           now=still)
    for pair in range(40):
        switch.after_pair(pair, "ref", "ref" if pair < 20 else "stale")
    check = switch.check(warmup_pairs=5)
    assert check["outcome"] == "fail" and check["failVerdict"] == "cheating"
    assert "first: pair 20, timed" in check["evidence"]

    race = OutputSampler(lambda c, r: (c == r, None if c == r else "output 0: off"), floor=1.0, rng=random.Random(0),
                         now=still)
    for pair in range(40):
        race.after_pair(pair, "ref", "stale" if pair == 7 else "ref")
    check = race.check(warmup_pairs=5)
    assert check["outcome"] == "fail" and check["failVerdict"] == "incorrect"
    assert "intermittently wrong" in check["evidence"]


def test_between_runs_before_every_pair_and_after_the_last_outside_the_clock() -> None:
    events: list[str] = []

    class Clock:
        method, flush_bytes = "fake", 0

        def time_ms(self, fn):
            events.append("start")
            fn()
            events.append("end")
            return 1.0

    options = TimingOptions(enabled=True, warmup_iters=2, min_iters=3, max_iters=3, budget_seconds=100.0,
                            target_relative_ci=1e-9)
    measure_interleaved(lambda: events.append("ref"), lambda: events.append("cand"), options, Clock(),
                        between=lambda pair, more: events.append(f"between{pair}" + ("" if more else " last")),
                        before=lambda side: events.append(f"before {side}"))
    assert [e for e in events[:10] if not e.startswith("before")] == ["between0", "ref", "cand", "between1", "cand",
                                                                      "ref"]
    # Timed pairs: each side's own preparation right before its call, outside the clock; pair 2 runs the
    # reference first, pair 3 the candidate.
    assert events[10:19] == ["between2", "before ref", "start", "ref", "end", "before cand", "start", "cand", "end"]
    assert events[19:28] == ["between3", "before cand", "start", "cand", "end", "before ref", "start", "ref", "end"]
    assert events[-1] == "between5 last"  # the last pair's outputs are checked too, no new inputs
    assert events.count("between2") == 1 and sum(e.startswith("between") for e in events) == 6


def _corpus_candidate(name: str) -> str:
    return str(CORPUS / "candidates" / f"{name}.py")


def test_a_cache_served_only_in_the_timing_loop_is_cheating(cache_dir: str) -> None:
    """Address-keyed cache switched on by the call rhythm: with one unchanged input set per side it was served
    and correct; with values rewritten before every call it is stale, and the sampled outputs show it."""
    request = make_request(str(CORPUS / "problems" / "tiny_linear_relu.py"), _corpus_candidate("adv_call_rhythm_cache"),
                           cache_dir, timing=True, min_iters=80, max_iters=80)
    result, _ = evaluate(request)
    assert result["verdict"] == "cheating", result["reason"]
    assert result["reason"].startswith("timed_spot_check:") and "while it is timed" in result["reason"]
    inputs = result["timing"]["inputs"]
    assert inputs["wrong"] > 0 and inputs["sampled"] >= inputs["wrong"] and inputs["sets"] == 4
    assert_valid({"type": "result", "result": result})


def test_a_sound_identity_memo_never_hits_and_an_honest_candidate_passes_every_sample(cache_dir: str) -> None:
    request = make_request(str(CORPUS / "problems" / "cpu_linear.py"), _corpus_candidate("adv_version_memo"),
                           cache_dir, timing=True, min_iters=40, max_iters=40, budget_seconds=60)
    result, _ = evaluate(request)
    assert result["verdict"] == "correct", result["reason"]
    spot = next(c for c in result["checks"] if c["name"] == "timed_spot_check")
    assert spot["outcome"] == "pass"
    inputs = result["timing"]["inputs"]
    assert inputs["wrong"] == 0 and inputs["sampled"] >= 6 and inputs["refreshed"] == 40 + request["options"]["timing"]["warmupIters"]
    assert result["timing"]["speedup"] < 1.5  # served from the memo, it was ~100x with reused input sets


@pytest.mark.parametrize("name", ["linear_correct"])
def test_timing_method_says_how_inputs_were_fed(cache_dir: str, name: str) -> None:
    from conftest import candidate

    result, _ = evaluate(make_request(problem("tiny_linear"), candidate(name), cache_dir, timing=True))
    assert "fresh inputs every call" in result["timing"]["method"]
    assert result["timing"]["inputs"]["generation"] == "host"  # CPU: nothing to gain from a device default


def test_the_comparison_allowance_is_the_trials_measurement_not_the_modules(cache_dir: str, tmp_path) -> None:
    """compare.py's allowance for comparisons without float64 lives in module state the candidate can reach:
    a value written at import is replaced by what the trials measure; one written while timed is put back and
    named (harness_state)."""
    import kforge_worker.compare as compare

    writer = tmp_path / "writes_at_import.py"
    writer.write_text(
        "import torch, torch.nn as nn\nimport kforge_worker.compare as c\nc._reference_noise = 1e30\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, i, o):\n        super().__init__()\n        self.fc = nn.Linear(i, o)\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n"
    )
    result, _ = evaluate(make_request(problem("tiny_linear"), str(writer), cache_dir, timing=True))
    assert result["verdict"] == "correct"
    assert 0 < compare.reference_noise() < 1e-5  # fp32 rounding of a 16x8 linear, not 1e30

    timed = make_request(str(CORPUS / "problems" / "tiny_linear_relu.py"), _corpus_candidate("adv_compare_noise"),
                         cache_dir, timing=True, min_iters=80, max_iters=80)
    result, _ = evaluate(timed)
    assert result["verdict"] == "cheating" and result["reason"].startswith("harness_state: timing, before pair")
    assert compare.reference_noise() < 1e-5  # put back
    assert result["timing"]["inputs"]["wrong"] > 0  # and the stale answers were then seen
