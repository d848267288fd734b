"""Importing problems and candidates, and the verdicts for files that cannot be used."""

from __future__ import annotations

import pytest
from conftest import candidate, evaluate, make_request, problem

from kforge_worker.loading import LoadError, check_candidate, check_problem, has_code, import_path


def test_has_code_distinguishes_empty_files_from_real_ones() -> None:
    assert not has_code("")
    assert not has_code("# only a comment\n\n")
    assert not has_code('"""A docstring."""\npass\n')
    assert has_code("import torch\n")
    assert has_code("def broken(:\n")  # unparsable text is code with a syntax error, not "no code"


def test_each_import_is_a_fresh_module_with_a_unique_name() -> None:
    first = import_path(problem("tiny_linear"), "problem")
    second = import_path(problem("tiny_linear"), "problem")
    assert first is not second
    assert first.__name__ != second.__name__
    assert first.Model is not second.Model
    check_problem(first, problem("tiny_linear"))


@pytest.mark.parametrize(
    ("fixture", "missing"),
    [("missing_model", "Model"), ("missing_get_inputs", "get_inputs")],
)
def test_problem_without_kernelbench_api_names_what_is_missing(fixture: str, missing: str) -> None:
    module = import_path(problem(fixture), "problem")
    with pytest.raises(LoadError, match=rf"defines no {missing}\b"):
        check_problem(module, problem(fixture))


def test_candidate_without_modelnew_lists_what_it_defines() -> None:
    module = import_path(candidate("no_modelnew"), "candidate")
    with pytest.raises(LoadError, match=r"defines no ModelNew \(it defines: FastModel\)"):
        check_candidate(module, candidate("no_modelnew"))


@pytest.mark.parametrize(
    ("problem_name", "candidate_name", "verdict", "reason_part"),
    [
        ("missing_model", "linear_correct", "problem_error", "problem missing_model.py defines no Model"),
        ("missing_get_inputs", "linear_correct", "problem_error", "defines no get_inputs"),
        ("tiny_linear", "empty", "no_code", "has no code"),
        ("tiny_linear", "comments_only", "no_code", "has no code"),
        ("tiny_linear", "no_modelnew", "import_error", "defines no ModelNew"),
        ("tiny_linear", "import_raises", "import_error", "No module named 'kforge_missing_triton_like_module'"),
    ],
)
def test_unusable_files_get_clear_verdicts(
    cache_dir: str, problem_name: str, candidate_name: str, verdict: str, reason_part: str
) -> None:
    result, _ = evaluate(make_request(problem(problem_name), candidate(candidate_name), cache_dir))
    assert result["verdict"] == verdict
    assert reason_part in result["reason"]
    assert result["trials"] == []


def test_syntax_error_reason_quotes_the_line_not_importlib_frames(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("syntax_error"), cache_dir))
    assert result["verdict"] == "import_error"
    assert "SyntaxError" in result["reason"]
    assert "syntax_error.py, line 5" in result["reason"]
    assert "def forward(self, x)" in result["reason"]
    assert "frozen" not in result["reason"]


def test_missing_files_are_charged_to_their_side_naming_the_path(cache_dir: str, tmp_path) -> None:
    ghost = str(tmp_path / "nope.py")
    result, _ = evaluate(make_request(problem("tiny_linear"), ghost, cache_dir))
    assert result["verdict"] == "import_error"
    assert "candidate file not found" in result["reason"] and "nope.py" in result["reason"]
    result, _ = evaluate(make_request(ghost, candidate("linear_correct"), cache_dir))
    assert result["verdict"] == "problem_error"
    assert "problem file not found" in result["reason"]


def test_a_problem_that_needs_cuda_on_a_cpu_run_is_the_problems_error(cache_dir: str, tmp_path) -> None:
    """A problem whose get_inputs hard-codes device="cuda", run with --device cpu on a machine without CUDA:
    the problem cannot run here, which is not the candidate's runtime error."""
    cuda_problem = tmp_path / "needs_cuda.py"
    source = open(problem("tiny_linear"), encoding="utf-8").read()
    assert "torch.rand(4, 16)" in source
    cuda_problem.write_text(source.replace("torch.rand(4, 16)", 'torch.rand(4, 16, device="cuda")'), encoding="utf-8")
    result, _ = evaluate(make_request(str(cuda_problem), candidate("linear_correct"), cache_dir))
    if result["verdict"] == "correct":
        pytest.skip("this machine has CUDA")
    assert result["verdict"] == "problem_error", result["reason"]
    assert result["reason"].startswith("problem ")


def test_candidate_with_any_suffix_is_imported(cache_dir: str, tmp_path) -> None:
    block = tmp_path / "transcript_block_3.txt"
    block.write_text(open(candidate("linear_correct")).read())
    result, _ = evaluate(make_request(problem("tiny_linear"), str(block), cache_dir))
    assert result["verdict"] == "correct", result["reason"]


def test_cuda_error_boilerplate_is_dropped_from_reasons() -> None:
    from kforge_worker.errors import exception_headline

    exc = RuntimeError(
        "CUDA error: an illegal memory access was encountered\n"
        "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n"
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
    )
    assert exception_headline(exc) == "RuntimeError: CUDA error: an illegal memory access was encountered"
