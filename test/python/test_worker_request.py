"""EvalRequest parsing: the fields protocol.ts defines, with errors that name the bad field."""

from __future__ import annotations

import copy

import pytest
from conftest import assert_valid, candidate, make_request, problem

from kforge_worker.request import RequestError, parse_request


def base() -> dict:
    return make_request(problem("tiny_linear"), candidate("linear_correct"), "/tmp/kforge-cache", trials=7, seed=3)


def test_helper_requests_match_the_ts_schema() -> None:
    assert_valid(base(), "EvalRequest")
    assert_valid(make_request(problem("a"), candidate("b"), "/c", precision="fp16", atol=0.1, rtol=0.2), "EvalRequest")


def test_parse_request_reads_every_field() -> None:
    request = parse_request(base())
    assert request.trials == 7 and request.seed == 3
    assert request.device == "cpu" and request.precision is None
    assert request.timing.min_iters == 10 and request.timing.budget_seconds == 2.0
    assert request.origin["kind"] == "file"
    assert request.strict is False  # absent (older and hand-written requests): library ops disclosed


def test_strict_is_optional_and_read_when_given() -> None:
    request = base()
    request["options"]["strict"] = True
    assert_valid(request, "EvalRequest")
    assert parse_request(request).strict is True
    request["options"]["strict"] = False
    assert parse_request(request).strict is False


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(protocol=2), "request.protocol: worker speaks protocol 1"),
        (lambda r: r["options"].update(trials=0), "request.options.trials: expected an integer >= 1"),
        (lambda r: r["options"].update(device="tpu"), "request.options.device: expected one of cuda, cpu"),
        (lambda r: r["options"].update(precision="fp8"), "request.options.precision"),
        (lambda r: r["problem"].update(atol=-1), "request.problem.atol: expected a positive number or null"),
        (lambda r: r["options"]["timing"].pop("budgetSeconds"), "request.options.timing.budgetSeconds: missing"),
        (lambda r: r["candidate"]["origin"].update(blockIndex=-2), "request.candidate.origin.blockIndex"),
        (lambda r: r["options"].update(strict="yes"), "request.options.strict: expected a boolean"),
    ],
)
def test_bad_fields_are_named(mutate, message: str) -> None:
    request = copy.deepcopy(base())
    mutate(request)
    with pytest.raises(RequestError, match=message.replace(".", r"\.").replace("(", r"\(")):
        parse_request(request)
