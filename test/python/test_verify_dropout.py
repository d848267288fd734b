"""Active dropout: every forward is random, so reference and candidate are compared on the same random stream
(each forward seeded from its inputs) — in the trials and in every runtime check. A candidate keeping PyTorch's
Dropout call is correct; one that skips it, or draws its own mask, is incorrect. Before, the trials drew
different masks and the float64 allowance (the reference's own "error" was the mask difference) let nearly
anything pass, while the checks rejected even the reference's own ops."""

from __future__ import annotations

import pytest
from conftest import candidate, evaluate, make_request, problem


@pytest.mark.parametrize("checks", [False, True], ids=["trials", "trials+checks"])
def test_a_candidate_keeping_dropout_is_correct(cache_dir: str, checks: bool) -> None:
    result, _ = evaluate(make_request(problem("tiny_dropout"), candidate("dropout_correct"), cache_dir, trials=3),
                         use_checks=checks)
    assert result["verdict"] == "correct", result["reason"]
    for trial in result["trials"]:
        (out,) = trial["outputs"]
        assert out["vsRef"]["maxAbs"] < 1e-5  # the same mask: equal up to rounding, not merely close
    if checks:
        precision = next(c for c in result["checks"] if c["name"] == "precision")
        assert precision["outcome"] == "skip" and "dropout" in precision["evidence"]


@pytest.mark.parametrize("name", ["dropout_skipped", "dropout_own_mask"])
def test_skipping_dropout_or_drawing_another_mask_is_incorrect(cache_dir: str, name: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_dropout"), candidate(name), cache_dir, trials=3))
    assert result["verdict"] == "incorrect", result["reason"]


def test_timed_calls_of_a_dropout_model_are_compared_on_one_stream(cache_dir: str) -> None:
    request = make_request(problem("tiny_dropout"), candidate("dropout_correct"), cache_dir, trials=2, timing=True,
                           min_iters=20, max_iters=20)
    result, _ = evaluate(request, use_checks=True)
    assert result["verdict"] == "correct", result["reason"]
    spot = next(c for c in result["checks"] if c["name"] == "timed_spot_check")
    assert spot["outcome"] == "pass", spot["evidence"]
    skipped, _ = evaluate(make_request(problem("tiny_dropout"), candidate("dropout_skipped"), cache_dir, trials=2,
                                       timing=True, min_iters=20, max_iters=20), use_checks=True)
    assert skipped["verdict"] == "incorrect"
