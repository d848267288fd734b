"""The candidate's own load_inline builds: captured output, compile_error verdicts, the extension cache.

The C++ extensions compile on CPU with g++ (~30 s each on 2 cores), so the successful build runs once
per session and is then reused — which is itself what the cache test checks.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest
from conftest import StartedWorker, WorkerRun, assert_valid, candidate, make_request, problem, run_worker

from kforge_worker.compile_capture import capture_fds, extension_dir, first_diagnostics


@pytest.fixture(scope="module")
def cpp_runs(shared_cache_dir: str) -> tuple[WorkerRun, WorkerRun, WorkerRun]:
    """A good load_inline candidate evaluated twice with one cache, and a broken one built alongside."""
    good = make_request(problem("tiny_add"), candidate("add_cpp_ok"), shared_cache_dir, trials=5, checks=["none"])
    broken = make_request(problem("tiny_add"), candidate("add_cpp_broken"), shared_cache_dir, checks=["none"])
    first, failing = StartedWorker(good), StartedWorker(broken)  # two builds at once: one per core
    first_run, failing_run = first.wait(), failing.wait()
    return first_run, run_worker(good), failing_run


def test_load_inline_candidate_compiles_on_cpu_and_is_correct(cpp_runs: tuple[WorkerRun, ...]) -> None:
    first = cpp_runs[0].result
    assert first["verdict"] == "correct", first["reason"]
    (call,) = first["compile"]
    assert call["name"] == "load_inline:kforge_test_add" and call["ok"]
    assert "main.cpp" in call["log"]  # the compiler command line, captured from ninja at the fd level
    for message in cpp_runs[0].messages:
        assert_valid(message)
    assert any(m.get("stage") == "compile" for m in cpp_runs[0].messages)


def test_second_run_reuses_the_content_keyed_extension_cache(
    cpp_runs: tuple[WorkerRun, ...], shared_cache_dir: str
) -> None:
    first, second = (run.result["compile"][0] for run in cpp_runs[:2])
    assert second["ok"] and cpp_runs[1].result["verdict"] == "correct"
    assert "no work to do" in second["log"]
    assert second["seconds"] < first["seconds"] / 2
    built = glob.glob(os.path.join(shared_cache_dir, "torch_extensions", "*", "kforge_test_add", "*.so"))
    assert len(built) == 1


def test_compile_failure_is_a_compile_error_quoting_the_compiler(cpp_runs: tuple[WorkerRun, ...]) -> None:
    result = cpp_runs[2].result
    assert result["verdict"] == "compile_error"
    reason = result["reason"]
    headline = reason.splitlines()[0]
    assert "error" in headline and "[load_inline:kforge_test_add_broken failed after" in headline
    assert "main.cpp:4:" in reason and "error:" in reason and "undeclared_tensor_b" in reason
    assert "Traceback" not in reason
    (call,) = result["compile"]
    assert not call["ok"] and "undeclared_tensor_b" in call["log"]
    assert_valid({"type": "result", "result": result})


def test_extension_dir_is_keyed_by_content_and_toolchain() -> None:
    a = extension_dir("/c", b"source", "2.11.0", "13.0")
    assert a == extension_dir("/c", b"source", "2.11.0", "13.0")
    assert a.startswith(os.path.join("/c", "torch_extensions", ""))
    assert len({a, extension_dir("/c", b"source2", "2.11.0", "13.0"), extension_dir("/c", b"source", "2.10.0", "13.0"),
                extension_dir("/c", b"source", "2.11.0", None)}) == 4


def test_first_diagnostics_picks_error_lines_not_commands() -> None:
    log = "\n".join([
        "[1/2] /usr/local/cuda/bin/nvcc -Werror=all -c /tmp/x/cuda.cu -o cuda.cuda.o",
        "FAILED: cuda.cuda.o",
        "/tmp/build/kforge/cuda.cu(12): error: identifier \"blockDimx\" is undefined",
        "/tmp/build/kforge/main.cpp:7:3: error: 'foo' was not declared in this scope",
        "    7 |   foo();",
        "      |   ^~~",
        "1 error detected in the compilation of \"/tmp/x/cuda.cu\".",
        "ninja: build stopped: subcommand failed.",
    ])
    assert first_diagnostics(log) == [
        'cuda.cu(12): error: identifier "blockDimx" is undefined',
        "main.cpp:7:3: error: 'foo' was not declared in this scope",
        "    7 |   foo();",
        '1 error detected in the compilation of "cuda.cu".',
    ]


def test_capture_fds_catches_raw_writes_and_child_processes() -> None:
    with capture_fds() as captured:
        os.write(1, b"raw fd 1\n")
        os.write(2, b"raw fd 2\n")
        subprocess.run([sys.executable, "-c", "import sys; print('child'); print('child err', file=sys.stderr)"], check=True)
    text = captured()
    for part in ("raw fd 1", "raw fd 2", "child", "child err"):
        assert part in text
