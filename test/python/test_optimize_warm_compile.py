"""warm_compile (``--warm-compile``): torch.compile(reference) run once as the optimize bench will run it, so the
bench's compile loads from inductor's caches. Same call as the bench's (a deep copy, inputs from get_inputs(),
grad off): a different call would warm a different cache entry."""

from __future__ import annotations

import torch

from kforge_worker import optimize_bench

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return [8]
'''


def test_it_compiles_the_reference_once_with_grad_off(tmp_path, monkeypatch) -> None:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM)
    calls = []

    def fake_compile(model):
        def run(*inputs):
            calls.append((type(model).__name__, torch.is_grad_enabled(), [tuple(x.shape) for x in inputs]))
            return model(*inputs)
        return run

    monkeypatch.setattr(torch, "compile", fake_compile)
    result = optimize_bench.warm_compile({"problemPath": str(path), "device": "cpu"})
    assert result["error"] is None and result["seconds"] >= 0
    assert calls == [("Model", False, [(4, 8)])]


def test_a_failure_is_reported_not_raised(tmp_path) -> None:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.replace("super().__init__()", "super().__init__()\n        raise ValueError('no model')"))
    result = optimize_bench.warm_compile({"problemPath": str(path), "device": "cpu"})
    assert result["error"] == "ValueError: no model"
