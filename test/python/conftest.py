"""Shared helpers for the kforge_worker tests: fixture paths, requests, and running the worker.

Unit tests import kforge_worker directly (python/ is put on sys.path); end-to-end tests run
``python -m kforge_worker`` as a subprocess, exactly as the CLI does.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# As the worker does before it imports torch when the reference runs in its own process: both processes'
# OpenMP teams wait passively, so one spinning between parallel regions does not steal the cores the other
# is being timed on. Tests run the pipeline in this process, where torch is imported before the pipeline
# could set it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

REPO = Path(__file__).resolve().parents[2]
PYTHON_DIR = REPO / "python"
FIXTURES = REPO / "test" / "fixtures" / "python"
PROBLEMS = FIXTURES / "problems"
CANDIDATES = FIXTURES / "candidates"

if str(PYTHON_DIR) not in sys.path:
    sys.path.insert(0, str(PYTHON_DIR))


# Files that time nothing and whose tests are timed by nothing: compiles (nvcc, g++), captures, code generation,
# pure functions, untimed evaluations (no timing loop, no race against a thread). scripts/pytest.sh runs these two at a time (pytest-xdist, -m parallel) before the rest, which
# runs one test at a time as before: a timed evaluation, or the corpus with its own two jobs, must not share
# CI's two cores with a third process. A new file runs with the rest until it is listed here.
PARALLEL_FILES = {
    "test_attention_recipe.py", "test_attention_records.py", "test_attention_wgmma_header.py", "test_capture.py",
    "test_check_budget.py", "test_check_peaks.py", "test_codegen_norm_pool_nvcc.py", "test_codegen_templates_nvcc.py",
    "test_linear_bn_softmax_cpu.py", "test_linear_bn_softmax_nvcc.py", "test_op_math.py", "test_optimize_builtin.py",
    "test_extension_cache.py", "test_optimize_emit.py", "test_optimize_recipes.py", "test_optimize_runtime.py",
    "test_probe_arch_list.py", "test_problems.py", "test_ray_task.py", "test_state_buffers.py",
    "test_stack_dump.py", "test_suite_contract.py", "test_timed_row_rounding.py", "test_verify_constants.py",
    "test_verify_input_sensitivity.py", "test_verify_redteam16.py", "test_verify_static.py",
    "test_verify_tight_tolerance.py",
    "test_verify_units.py", "test_worker_compare.py", "test_worker_compile.py", "test_worker_loading.py",
    "test_worker_request.py", "test_worker_stats.py",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "heavy: slow sweeps (nvcc over every built-in problem); run only with -m")
    config.addinivalue_line("markers", "parallel: a test of PARALLEL_FILES (conftest.py): may run beside another")


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.path.name in PARALLEL_FILES:
        item.add_marker("parallel")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked heavy are deselected unless a -m expression picks the tests (e.g. -m heavy)."""
    if config.option.markexpr:
        return
    heavy = [item for item in items if item.get_closest_marker("heavy")]
    if heavy:
        config.hook.pytest_deselected(items=heavy)
        items[:] = [item for item in items if not item.get_closest_marker("heavy")]


def find_nvcc() -> str | None:
    """nvcc for the compile-only tests: $NVCC, else the one on PATH, else the newest /usr/local/cuda*/bin/nvcc."""
    named = os.environ.get("NVCC")
    if named and os.path.exists(named):
        return named
    found = shutil.which("nvcc")
    if found:
        return found
    candidates = sorted(glob.glob("/usr/local/cuda*/bin/nvcc"))
    return candidates[-1] if candidates else None


def problem(name: str) -> str:
    return str(PROBLEMS / f"{name}.py")


def candidate(name: str) -> str:
    return str(CANDIDATES / f"{name}.py")


def make_request(
    problem_path: str,
    candidate_path: str,
    cache_dir: str,
    *,
    trials: int = 3,
    seed: int = 0,
    precision: str | None = None,
    allow_tf32: bool = False,
    timing: bool = False,
    atol: float | None = None,
    rtol: float | None = None,
    min_iters: int = 10,
    max_iters: int = 40,
    budget_seconds: float = 2.0,
    target_relative_ci: float = 0.02,
    checks: list[str] | None = None,
) -> dict[str, Any]:
    """An EvalRequest (protocol.ts) for the CPU device."""
    return {
        "protocol": 1,
        "problem": {"path": problem_path, "name": Path(problem_path).stem, "atol": atol, "rtol": rtol},
        "candidate": {
            "path": candidate_path,
            "label": Path(candidate_path).stem,
            "origin": {"kind": "file", "sourcePath": candidate_path, "blockIndex": None, "blockCount": None, "note": None},
        },
        "options": {
            "trials": trials,
            "seed": seed,
            "precision": precision,
            "allowTf32": allow_tf32,
            "device": "cpu",
            "timing": {
                "enabled": timing,
                "warmupIters": 2,
                "minIters": min_iters,
                "maxIters": max_iters,
                "budgetSeconds": budget_seconds,
                "targetRelativeCi": target_relative_ci,
            },
            "cacheDir": cache_dir,
            "checks": list(checks or []),
        },
    }


class WorkerRun:
    """What one worker process wrote: parsed stdout lines, raw stdout/stderr, exit status."""

    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.messages = [json.loads(line) for line in stdout.splitlines()]

    @property
    def results(self) -> list[dict[str, Any]]:
        return [m["result"] for m in self.messages if m.get("type") == "result"]

    @property
    def result(self) -> dict[str, Any]:
        assert len(self.results) == 1, f"expected one result line, got {len(self.results)}:\n{self.stderr[-3000:]}"
        return self.results[0]


class StartedWorker:
    """A worker process running in the background (to overlap slow compiles); ``wait()`` collects it."""

    def __init__(self, request: dict[str, Any] | None, args: tuple[str, ...] = (), path_first: str | None = None) -> None:
        paths = [path_first, str(PYTHON_DIR)] if path_first else [str(PYTHON_DIR)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "kforge_worker", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(REPO),
        )
        self._input = json.dumps(request) if request is not None else ""

    def wait(self, timeout: float = 300) -> WorkerRun:
        try:
            stdout, stderr = self._proc.communicate(self._input, timeout=timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            raise
        return WorkerRun(self._proc.returncode, stdout, stderr)


def run_worker(
    request: dict[str, Any] | None, args: tuple[str, ...] = (), timeout: float = 300, path_first: str | None = None
) -> WorkerRun:
    """``python -m kforge_worker`` with PYTHONPATH=python (after path_first, if given), the request on stdin."""
    return StartedWorker(request, args, path_first).wait(timeout)


def evaluate(request: dict[str, Any], use_checks: bool = False) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Runs the pipeline in this process: (result, progress messages).

    The verification checks (kforge_worker.checks, tested on their own) are off unless asked for, so
    these tests pin down the pipeline's own stages.
    """
    from kforge_worker.channel import NullChannel
    from kforge_worker.pipeline import evaluate as run_pipeline
    from kforge_worker.request import parse_request

    channel = NullChannel()
    result = run_pipeline(parse_request(request), channel, use_checks=use_checks)
    channel.result(result)
    return result, channel.messages


@pytest.fixture
def cache_dir(tmp_path: Path) -> str:
    return str(tmp_path / "cache")


@pytest.fixture(scope="session")
def shared_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One cache for the session, so C++ extensions compile once across tests."""
    return str(tmp_path_factory.mktemp("kforge-cache"))


def assert_valid(message: dict[str, Any], schema_name: str = "WorkerMessage") -> None:
    """Validates against the JSON Schema exported from protocol.ts (schemas/), required to exist."""
    from kforge_worker.schema_check import load_schema, validate

    schema = load_schema(schema_name)
    assert schema is not None, f"python/kforge_worker/schemas/{schema_name}.json missing: run `npm run schemas`"
    errors = validate(message, schema)
    assert not errors, "\n".join(errors[:20])
