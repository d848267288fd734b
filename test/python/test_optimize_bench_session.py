"""optimize_bench's served mode and phases: every bench of a problem in one process (the reference, its inputs and
torch.compile(reference) made once), each request's result on the OptimizeBenchResult schema with a per-phase
seconds breakdown, and the iteration cap for slow forwards."""

from __future__ import annotations

import io
import json
import os

import pytest
import torch

from kforge_worker import optimize_bench

from conftest import assert_valid

PROBLEM = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)
    def forward(self, x):
        return torch.relu(self.bn(x))

def get_inputs():
    return [torch.randn(16, 4) * 3 + 5]

def get_init_inputs():
    return [4]
'''

# A candidate with one region switchable to the reference's ops, as the emitted files have.
CANDIDATE = '''
import torch
import torch.nn as nn

_KF_DISABLED = set()

class ModelNew(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c)
    def _kf_r0(self, y):
        return torch.relu(y)
    def forward(self, x):
        return self._kf_r0(self.bn(x))
'''


def _files(tmp_path):
    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM)
    first = tmp_path / "first_new.py"
    first.write_text(CANDIDATE)
    second = tmp_path / "second_new.py"
    second.write_text(CANDIDATE.replace("torch.relu(y)", "torch.clamp_min(y, 0)"))
    return problem, first, second


def _request(problem, candidate, tmp_path, **extra):
    return {"problemPath": str(problem), "candidatePath": str(candidate), "device": "cpu",
            "cacheDir": str(tmp_path / "cache"), "iters": 5, "compileBaseline": True, "regions": ["r0"], **extra}


def test_one_process_serves_every_bench_of_a_problem_and_compiles_once(tmp_path, monkeypatch) -> None:
    problem, first, second = _files(tmp_path)
    compiles = []

    def fake_compile(model):
        compiles.append(type(model).__name__)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    lines = [json.dumps(_request(problem, first, tmp_path, spawnedAt=1000)),
             json.dumps(_request(problem, second, tmp_path, timeFile=False)),
             json.dumps(_request(problem, second, tmp_path, regions=[]))]
    read_fd, write_fd = os.pipe()
    optimize_bench.serve(io.StringIO("\n".join(lines) + "\n"), write_fd)
    os.close(write_fd)
    with os.fdopen(read_fd) as out:
        results = [json.loads(line) for line in out.read().splitlines()]
    assert len(results) == 3
    for result in results:
        assert_valid(result, "OptimizeBenchResult")
        assert result["error"] is None
    assert compiles == ["Model"], "torch.compile(reference) once for the three requests"
    regions_and_file, regions_only, file_only = results
    assert regions_and_file["phases"]["startup"] is not None
    assert regions_and_file["eagerMs"] and regions_and_file["compiledMs"] and regions_and_file["oursMs"]
    assert regions_and_file["regions"][0]["kernelMs"] is not None
    assert regions_and_file["compileCheck"] == {"correct": True, "note": None}, "the reference itself passes"
    # A re-timing of regions times no whole file; a served request pays no startup, import or compile.
    assert regions_only["eagerMs"] is None and regions_only["regions"][0]["torchMs"] is not None
    assert file_only["regions"] == [] and file_only["oursMs"] and file_only["compiledMs"]
    for later in (regions_only, file_only):
        assert later["phases"]["startup"] is None
        assert later["phases"]["problemImport"] == 0 and later["phases"]["compile"] == 0


def test_a_compiled_reference_off_by_more_than_the_tolerance_is_reported(tmp_path, monkeypatch) -> None:
    """torch.compile(reference) is timed and reported either way; its outputs failing the candidate's check are
    named (on the CPU there is no TF32 to switch off: no exact variant)."""
    problem, first, _ = _files(tmp_path)

    class Shifted(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, *args):
            return self.model(*args) + 1e-2

    monkeypatch.setattr(torch, "compile", Shifted)
    result = optimize_bench.bench(_request(problem, first, tmp_path))
    assert_valid(result, "OptimizeBenchResult")
    assert result["error"] is None and result["compiledMs"] is not None
    assert result["compileCheck"]["correct"] is False
    assert result["compileCheck"]["note"].startswith("output 0"), result["compileCheck"]
    assert "compiledExactMs" not in result


def test_each_candidate_starts_from_the_reference_weights_as_built(tmp_path) -> None:
    problem, first, second = _files(tmp_path)
    state = optimize_bench.ProblemState(str(problem), torch.device("cpu"))
    optimize_bench.bench(_request(problem, first, tmp_path, compileBaseline=False), state)
    # The reference's BatchNorm (training) moved its running mean over the timed calls; the weights a candidate
    # gets are those it was built with.
    assert state.ref.bn.running_mean.abs().sum() > 0
    assert torch.equal(state.initial_state["bn.running_mean"], torch.zeros(4))


def test_the_one_shot_bench_reports_its_phases(tmp_path) -> None:
    problem, first, _ = _files(tmp_path)
    result = optimize_bench.bench(_request(problem, first, tmp_path, compileBaseline=False))
    assert_valid(result, "OptimizeBenchResult")
    assert set(result["phases"]) >= {"problemImport", "candidateImport", "firstCall", "timing", "regions"}
    assert result["iters"] >= 5 and result["regions"][0]["seconds"] >= 0


def test_slow_forwards_are_timed_in_fewer_rounds_never_below_the_floor() -> None:
    scaled = optimize_bench.scaled_iters
    assert scaled(50, 0.02) == 50, "rounds of 20 ms: the requested count already fills the minimum time"
    assert scaled(50, 0.1) == 20, "a 0.1 s round: the 2 s budget, 20 rounds"
    assert scaled(50, 5.0) == optimize_bench.MIN_ITERS
    assert scaled(5, 5.0) == 5, "never more than requested"


def test_fast_forwards_are_timed_in_more_rounds_up_to_a_cap() -> None:
    """Fifty rounds of a 23 µs forward (a few milliseconds in all) measured the reference's own forward, emitted
    verbatim, at 0.82x of itself on an H200."""
    scaled = optimize_bench.scaled_iters
    assert scaled(50, 0.0003) == 1667, "0.3 ms rounds fill the minimum timing time"
    assert scaled(50, 0.00001) == optimize_bench.MAX_ITERS
    assert scaled(3000, 0.0001) == 3000, "never fewer than requested while within the budget"


def test_region_timings_take_fewer_rounds_than_a_fast_whole_forward() -> None:
    rounds = optimize_bench.region_rounds
    assert rounds(25, 0.00002) == optimize_bench.REGION_MAX_ROUNDS, "a 20 µs region: capped"
    assert rounds(25, 0.1) == optimize_bench.scaled_iters(25, 0.1), "a slow region: the forward's own budget"
    assert rounds(1000, 0.00002) == 1000, "never fewer than requested"


NUMPY_INPUTS = '''
import numpy as np
import torch

def get_inputs():
    return [torch.from_numpy(np.ones((4, 4), dtype=np.float32)), torch.randn(3).numpy().sum()]
'''

DEVICE_INPUTS = '''
import torch

def get_inputs():
    return [torch.randn(64, 8) * 3, torch.randint(0, 5, (4,)).cuda(), torch.zeros(2).to("cpu"), 7]
'''


def _module(tmp_path, name: str, text: str):
    from kforge_worker.loading import import_path

    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return import_path(str(path), "problem")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bench_inputs_are_made_on_the_gpu_and_fall_back_to_the_cpu(tmp_path):
    device = torch.device("cuda")
    made = optimize_bench._inputs(_module(tmp_path, "device_inputs", DEVICE_INPUTS), device)
    assert [x.device.type for x in made[:3]] == ["cuda"] * 3 and made[3] == 7
    assert made[0].shape == (64, 8) and 1.5 < float(made[0].std()) < 4.5
    assert made[1].dtype == torch.int64 and int(made[1].max()) < 5
    # numpy needs CPU tensors: the whole get_inputs() runs on the CPU and its tensors are copied
    fallback = optimize_bench._inputs(_module(tmp_path, "numpy_inputs", NUMPY_INPUTS), device)
    assert fallback[0].device.type == "cuda" and float(fallback[0].sum()) == 16.0
    assert not isinstance(fallback[1], torch.Tensor)
