"""What the suite scheduler (src/suite/eval-suite.ts gpuLost) reads from a worker result: a worker whose torch
sees no GPU although one was asked for says so in a fixed form, and the scheduler then moves the candidate to
another GPU instead of charging it. If this message changes, change the pattern there too."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import candidate, evaluate, make_request, problem

GPU_LOST = re.compile(r"^device cuda requested but .* sees no GPU")  # eval-suite.ts gpuLost


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_a_worker_without_a_gpu_reports_it_in_the_form_the_scheduler_requeues(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir)
    request["options"]["device"] = "cuda"
    result, _ = evaluate(request)
    assert result["verdict"] == "runtime_error"
    assert GPU_LOST.match(result["reason"]), result["reason"]
