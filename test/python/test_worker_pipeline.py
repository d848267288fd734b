"""The pipeline in-process on tiny CPU problems: every verdict, parameter sync, precision, tolerance."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import assert_valid, candidate, evaluate, make_request, problem

from types import SimpleNamespace

from kforge_worker.pipeline import (EvalContext, device_generation, input_generation, seeded_inputs, sync_parameters,
                                   trial_seed)
from kforge_worker.reference_process import _Reference


def test_correct_candidate_with_state_dict_sync(cache_dir: str) -> None:
    result, messages = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, trials=5))
    assert result["verdict"] == "correct" and result["reason"] is None
    assert result["paramSync"] == {"mode": "state_dict", "detail": "2 tensors loaded from Model (strict)"}
    assert result["tolerance"] == {"atol": 1e-4, "rtol": 1e-4}
    assert len(result["trials"]) == 5
    assert len({t["seed"] for t in result["trials"]}) == 5  # fresh inputs every trial
    for trial in result["trials"]:
        (out,) = trial["outputs"]
        assert trial["passed"] and out["allclose"]
        assert out["shape"] == out["refShape"] == [4, 8]
        assert out["vsRef"] == {"maxAbs": 0.0, "relL2": 0.0}
        assert 0 < out["refVsFp64"]["relL2"] < 1e-6  # fp32 rounding, measured against float64
        assert out["candVsFp64"] == out["refVsFp64"]
    stages = [m["stage"] for m in messages if m["type"] == "progress"]
    assert stages[0] == "import" and "check" in stages
    # Where an eval's time goes: every stage that ran, in order, each timed.
    assert list(result["stageSeconds"])[:8] == ["load_problem", "check_fit", "start_reference", "await_go",
                                                "private_compiler_cache", "load_candidate", "build_models",
                                                "check_correctness"]
    assert all(s >= 0 for s in result["stageSeconds"].values())
    assert sum(result["stageSeconds"].values()) <= result["seconds"]
    for message in messages:
        assert_valid(message)


def test_trial_seeds_derive_from_the_request_seed_and_a_process_salt() -> None:
    assert trial_seed(0, 0) != trial_seed(0, 1) != trial_seed(1, 0)
    assert trial_seed(5, 2) == trial_seed(5, 2)
    assert 0 <= trial_seed(2**40, "timing") < 2**31
    # Knowing the request's seed is not enough to know the inputs: another salt, other seeds.
    assert trial_seed(5, 2, salt="a") == trial_seed(5, 2, salt="a") != trial_seed(5, 2, salt="b")
    assert trial_seed(5, 2) not in {trial_seed(5, 2, salt=""), trial_seed(5, 2, salt="a")}


def test_different_attribute_names_fall_back_to_seed_sync(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_seed_only"), cache_dir))
    assert result["verdict"] == "correct"  # same seed, same construction order, same weights
    assert result["paramSync"]["mode"] == "seed"
    assert "only in Model: fc.weight, fc.bias" in result["paramSync"]["detail"]
    assert "only in ModelNew: proj.weight, proj.bias" in result["paramSync"]["detail"]


def test_sync_parameters_reports_shape_differences_and_loads_matching_dicts() -> None:
    ref, new = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    assert sync_parameters(ref, new)["mode"] == "state_dict"
    assert torch.equal(ref.weight, new.weight)
    odd = torch.nn.Linear(2, 3)
    sync = sync_parameters(ref, odd)
    assert sync["mode"] == "seed" and "weight [3, 2] vs [2, 3]" in sync["detail"]


@pytest.mark.parametrize(
    ("problem_name", "candidate_name", "verdict", "reason_parts"),
    [
        ("tiny_linear", "raising", "runtime_error", ["ModelNew.forward: RuntimeError: kernel launch failed", "raising.py:14 in finish"]),
        ("tiny_linear", "sys_exit", "runtime_error", ["SystemExit: 3", "sys_exit.py:12 in forward"]),
        ("tiny_linear", "keyboard_interrupt", "runtime_error", ["ModelNew(*get_init_inputs()): KeyboardInterrupt"]),
        ("tiny_linear", "wrong_shape", "shape_mismatch", ["trial 0 output 0: shape [8, 4] vs reference [4, 8]"]),
        ("tiny_linear", "wrong_dtype", "shape_mismatch", ["dtype float64 vs reference float32"]),
        ("tiny_linear", "slightly_wrong", "incorrect", ["trial 0 output 0: max abs err 0.001 > atol+rtol·|ref|", "at 32 of 32 elements", "[3 of 3 trials failed]"]),
        ("tiny_linear", "nan_output", "incorrect", ["1 non-finite (NaN/Inf) of 32 elements"]),
        ("tiny_tuple", "tuple_second_wrong", "incorrect", ["output 1: max abs err"]),
        ("tiny_tuple", "tuple_too_few", "shape_mismatch", ["ModelNew returned 1 output tensor(s), Model 2"]),
    ],
)
def test_failing_candidates_get_their_verdict_and_reason(
    cache_dir: str, problem_name: str, candidate_name: str, verdict: str, reason_parts: list[str]
) -> None:
    result, _ = evaluate(make_request(problem(problem_name), candidate(candidate_name), cache_dir))
    assert result["verdict"] == verdict, result["reason"]
    for part in reason_parts:
        assert part in result["reason"]
    assert "kforge_worker" not in result["reason"]  # the worker's own frames never show
    assert_valid({"type": "result", "result": result})


def test_runtime_error_reason_skips_nn_module_plumbing(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("raising"), cache_dir))
    assert "module.py" not in result["reason"]
    assert len(result["reason"].splitlines()) <= 6


def test_tuple_outputs_are_compared_element_by_element(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_tuple"), candidate("tuple_correct"), cache_dir))
    assert result["verdict"] == "correct"
    outs = result["trials"][0]["outputs"]
    assert [o["index"] for o in outs] == [0, 1]
    assert outs[0]["shape"] == [3, 5] and outs[1]["shape"] == [3]
    wrong, _ = evaluate(make_request(problem("tiny_tuple"), candidate("tuple_second_wrong"), cache_dir))
    first = wrong["trials"][0]["outputs"]
    assert first[0]["allclose"] and not first[1]["allclose"]


def test_candidate_gets_clones_of_the_inputs(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("mutates_input"), cache_dir))
    assert result["verdict"] == "correct"  # zeroing its copy changed nothing for the reference


def test_batchnorm_buffers_are_synced_and_training_mode_kept(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_bn"), candidate("bn_correct"), cache_dir, trials=5, timing=True, min_iters=5, max_iters=10))
    assert result["verdict"] == "correct", result["reason"]
    assert result["paramSync"]["mode"] == "state_dict"
    # fc weight/bias, bn weight/bias, running mean/var, num_batches_tracked
    assert "7 tensors" in result["paramSync"]["detail"]


def test_precision_casts_inputs_and_both_models(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, precision="bf16"))
    assert result["verdict"] == "correct"
    assert result["precision"] == "bf16"
    assert result["tolerance"] == {"atol": 1e-2, "rtol": 1e-2}
    out = result["trials"][0]["outputs"][0]
    assert out["dtype"] == out["refDtype"] == "bfloat16"
    assert out["refVsFp64"]["relL2"] > 1e-4  # bf16 arithmetic is visibly coarser than fp32


def test_allow_tf32_sets_pytorchs_switch_before_the_models_run(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The candidate raises unless the switch is what this test asked for.
    import torch

    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32)
    for allow in (False, True, False):
        monkeypatch.setenv("KFORGE_TEST_EXPECT_TF32", "1" if allow else "0")
        request = make_request(problem("tiny_linear"), candidate("tf32_switch_probe"), cache_dir, allow_tf32=allow)
        result, _ = evaluate(request)
        assert result["allowTf32"] is allow
        assert result["verdict"] == "correct", result["reason"]


def test_the_candidate_cannot_read_the_input_seed_from_torch(
    cache_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "seeds.log"
    monkeypatch.setenv("KFORGE_TEST_SEED_LOG", str(log))
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("seed_peeker"), cache_dir, trials=3, seed=1234))
    assert result["verdict"] == "correct", result["reason"]
    construction, *calls = [int(line) for line in log.read_text().split()]
    # Construction runs under the request's seed (both models get the same parameters) ...
    assert construction == 1234 and len(calls) >= 3
    # ... but no forward sees it or its trial's seed, and those are not computable from it alone.
    assert not ({t["seed"] for t in result["trials"]} | {1234}) & set(calls)


def test_half_precision_tolerance_accepts_what_fp32_rejects(cache_dir: str) -> None:
    fp32, _ = evaluate(make_request(problem("tiny_linear"), candidate("slightly_wrong"), cache_dir))
    bf16, _ = evaluate(make_request(problem("tiny_linear"), candidate("slightly_wrong"), cache_dir, precision="bf16"))
    assert fp32["verdict"] == "incorrect"
    assert bf16["verdict"] == "correct"


def test_problem_metadata_and_request_override_the_tolerance(cache_dir: str) -> None:
    loose, _ = evaluate(make_request(problem("tolerance_override"), candidate("times_three_off"), cache_dir))
    assert loose["tolerance"] == {"atol": 5e-3, "rtol": 5e-3}
    assert loose["verdict"] == "correct"
    strict, _ = evaluate(
        make_request(problem("tolerance_override"), candidate("times_three_off"), cache_dir, atol=1e-4, rtol=1e-4)
    )
    assert strict["tolerance"] == {"atol": 1e-4, "rtol": 1e-4}
    assert strict["verdict"] == "incorrect"


def test_cpu_timing_produces_statistics_and_a_speedup(cache_dir: str) -> None:
    result, messages = evaluate(
        make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, timing=True, min_iters=20, max_iters=60)
    )
    timing = result["timing"]
    assert result["verdict"] == "correct"
    assert 20 <= timing["ref"]["n"] == timing["cand"]["n"] <= 60
    assert timing["ref"]["minMs"] <= timing["ref"]["p25Ms"] <= timing["ref"]["medianMs"] <= timing["ref"]["p75Ms"] <= timing["ref"]["maxMs"]
    assert timing["speedup"] == pytest.approx(timing["ref"]["medianMs"] / timing["cand"]["medianMs"])
    assert timing["speedupCi"][0] <= timing["speedup"] <= timing["speedupCi"][1]
    assert timing["smClockMhz"] == {"start": None, "end": None}
    assert timing["method"].startswith("cpu perf_counter")
    assert any(m.get("stage") == "time" for m in messages)
    assert_valid({"type": "result", "result": result})


def test_an_in_process_callers_own_children_are_not_the_candidates(cache_dir: str) -> None:
    """evaluate() in a process that already has children (a test runner's earlier subprocesses, one ended and not
    yet reaped): they existed before the candidate could run, so they are neither interference while the reference
    is timed nor processes the import started, and the evaluation does not end them."""
    import os
    import subprocess

    ended = os.fork()
    if ended == 0:
        os._exit(0)
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, timing=True,
                                          min_iters=20, max_iters=40))
        assert result["verdict"] == "correct", result["reason"]
        assert sleeper.poll() is None  # still running: not the candidate's to end
    finally:
        sleeper.kill()
        sleeper.wait()
        os.waitpid(ended, 0)


def test_no_timing_for_failing_candidates(cache_dir: str) -> None:
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("slightly_wrong"), cache_dir, timing=True))
    assert result["verdict"] == "incorrect"
    assert result["timing"] is None


def test_pipeline_restores_the_process_state(cache_dir: str) -> None:
    import os

    import torch.utils.cpp_extension as cpp_extension

    before = (cpp_extension.load_inline, cpp_extension.load, os.environ.get("TORCH_EXTENSIONS_DIR"))
    evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir))
    assert (cpp_extension.load_inline, cpp_extension.load, os.environ.get("TORCH_EXTENSIONS_DIR")) == before


class FakeChecks:
    """Stands in for kforge_worker.checks: records the hook calls, returns scripted checks."""

    def __init__(self, fail: str | None = None, crash: bool = False) -> None:
        self.calls: list[str] = []
        self.fail, self.crash = fail, crash

    def before_import(self, ctx) -> None:
        self.calls.append("before_import" + (":imported" if ctx.candidate is not None else ""))

    def after_import(self, ctx) -> None:
        self.calls.append("after_import" + (":imported" if ctx.candidate is not None else ""))

    def run_checks(self, ctx) -> list[dict]:
        self.calls.append("run_checks")
        if self.crash:
            raise ValueError("bug in a check")
        outcome = "fail" if self.fail else "pass"
        return [{"name": "fake", "outcome": outcome, "failVerdict": self.fail, "evidence": "scripted"}]

    def after_timing(self, ctx) -> list[dict]:
        self.calls.append("after_timing")
        return [{"name": "fake", "outcome": "pass", "failVerdict": None, "evidence": "after timing"}]

    def on_failure(self, ctx, verdict: str):
        self.calls.append(f"on_failure:{verdict}")
        return [], ("cheating", "fake: named on failure")

    def close(self, ctx) -> None:
        self.calls.append("close")


def _with_fake_checks(monkeypatch: pytest.MonkeyPatch, fake: FakeChecks) -> None:
    import kforge_worker.pipeline as pipeline

    monkeypatch.setattr(pipeline, "load_checks", lambda: fake)


def test_checks_hooks_run_in_order_and_a_later_check_replaces_an_earlier_one(
    cache_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeChecks()
    _with_fake_checks(monkeypatch, fake)
    result, messages = evaluate(
        make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, timing=True, min_iters=5, max_iters=5),
        use_checks=True,
    )
    assert fake.calls == ["before_import", "after_import:imported", "run_checks", "after_timing", "close"]
    assert result["verdict"] == "correct"
    fakes = [c for c in result["checks"] if c["name"] == "fake"]
    assert fakes == [{"name": "fake", "outcome": "pass", "failVerdict": None, "evidence": "after timing"}]
    # The pipeline's own checks (the clean reference process; the timed outputs, timed_inputs.py; the worker quiet
    # while the reference is timed, interference.py; the buffers after the timed calls, timed_state.py) run
    # whatever checks package is loaded.
    assert [c["name"] for c in result["checks"]] == ["reference_isolation", "timed_spot_check",
                                                     "reference_interference", "timed_state", "fake"]
    assert any(m.get("stage") == "verify" for m in messages)


def test_a_failed_check_sets_the_verdict_and_skips_timing(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_fake_checks(monkeypatch, FakeChecks(fail="cheating"))
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir, timing=True), use_checks=True)
    assert result["verdict"] == "cheating"
    assert result["reason"] == "fake: scripted"
    assert result["timing"] is None


def test_a_crashing_check_is_a_warning_not_a_verdict(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_fake_checks(monkeypatch, FakeChecks(crash=True))
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir), use_checks=True)
    assert result["verdict"] == "correct"
    (check,) = [c for c in result["checks"] if c["name"] != "reference_isolation"]
    assert check["name"] == "checks.run_checks" and check["outcome"] == "warn"
    assert "ValueError: bug in a check" in check["evidence"]


def test_checks_may_rename_a_failed_candidate_as_cheating(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeChecks()
    _with_fake_checks(monkeypatch, fake)
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("slightly_wrong"), cache_dir), use_checks=True)
    assert "on_failure:incorrect" in fake.calls
    assert (result["verdict"], result["reason"]) == ("cheating", "fake: named on failure")


def test_a_lazy_build_failing_inside_forward_is_a_compile_error(cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder wraps whatever load_inline is installed; here a stand-in that fails like a compiler."""
    import os

    import torch.utils.cpp_extension as cpp_extension

    def failing_build(name, cpp_sources, cuda_sources=None, functions=None, verbose=False, **kwargs):
        assert verbose is True  # forced, so ninja prints the compiler output
        os.write(1, b"[1/2] c++ -c main.cpp -o main.o\n/tmp/x/main.cpp:3:5: error: fake diagnostic from fd 1\n")
        raise RuntimeError(f"Error building extension '{name}'")

    monkeypatch.setattr(cpp_extension, "load_inline", failing_build)
    result, messages = evaluate(make_request(problem("tiny_linear"), candidate("lazy_compile"), cache_dir))
    assert result["verdict"] == "compile_error"
    assert "[load_inline:kforge_lazy failed after" in result["reason"].splitlines()[0]
    assert "main.cpp:3:5: error: fake diagnostic from fd 1" in result["reason"]
    (call,) = result["compile"]
    assert not call["ok"] and "fake diagnostic" in call["log"]
    assert [m["detail"] for m in messages if m.get("stage") == "compile"][0] == "building extension kforge_lazy"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only host's answer")
def test_cuda_requested_without_a_gpu_is_one_clear_reason(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir)
    request["options"]["device"] = "cuda"
    result, _ = evaluate(request)
    assert result["verdict"] == "runtime_error"
    assert result["reason"].startswith("device cuda requested but torch")
    assert "sees no GPU" in result["reason"]


def _problem_with(get_inputs) -> SimpleNamespace:  # noqa: ANN001
    return SimpleNamespace(get_inputs=get_inputs)


def test_inputs_are_drawn_on_the_device_only_where_get_inputs_gives_the_same_layout_there() -> None:
    meta = torch.device("meta")
    plain = _problem_with(lambda: [torch.randn(4, 3, dtype=torch.float16), 7])
    assert device_generation(torch, plain, meta) == meta
    assert device_generation(torch, plain, torch.device("cpu")) is None  # the host is where it draws anyway
    # A get_inputs that needs real values (here .item()) cannot run on meta: kept on the host.
    needs_values = _problem_with(lambda: [torch.randn(int(torch.randint(2, 5, ()).item()), 3)])
    assert device_generation(torch, needs_values, meta) is None
    # One that ignores the default device for one value differs from its meta run in dtype: kept on the host.
    flips = {"n": 0}

    def drifting() -> list:
        flips["n"] += 1
        return [torch.randn(2, dtype=torch.float64 if flips["n"] > 1 else torch.float32)]

    assert device_generation(torch, _problem_with(drifting), meta) is None
    # On the chosen device, one seed still gives one set of values; the generators are reseeded afterwards.
    first = seeded_inputs(torch, plain, 11, lambda x: x, torch.device("cpu"))
    again = seeded_inputs(torch, plain, 11, lambda x: x, torch.device("cpu"))
    assert torch.equal(first[0], again[0]) and first[1] == 7
    assert torch.initial_seed() != 11


def _input_makers(get_inputs, device: torch.device) -> list:  # noqa: ANN001
    """The worker's EvalContext and the reference process's child, each about to draw its first inputs."""
    ctx = EvalContext(request=None, channel=None, recorder=None, result={}, torch=torch, device=device,
                      problem=_problem_with(get_inputs))
    child = object.__new__(_Reference)  # its make_inputs alone: no problem file, no model
    child.torch, child.problem, child.device, child.dtype, child.input_device = (
        torch, _problem_with(get_inputs), device, None, False)
    return [ctx, child]


@pytest.mark.parametrize("where", ["meta", "cpu"])
def test_both_processes_decide_where_inputs_draw_once_and_by_one_rule(where: str) -> None:
    calls = {"n": 0}

    def get_inputs() -> list:
        calls["n"] += 1
        return [torch.randn(4, 3)]

    device = torch.device(where)
    for owner in _input_makers(get_inputs, device):
        calls["n"] = 0
        first, second = owner.make_inputs(5), owner.make_inputs(6)
        assert first[0].device == second[0].device == device
        if where == "meta":  # drawn with the device as default device: probed once (meta run, device run)
            assert owner.input_device == device and input_generation(owner) == "device"
            assert calls["n"] == 2 + 2
        else:  # the host draws anyway: no probe
            assert owner.input_device is None and input_generation(owner) == "host"
            assert calls["n"] == 2


class _NoCompileFailures:
    def failure_for(self, exc: BaseException) -> None:  # noqa: ARG002
        return None


def test_an_out_of_memory_in_a_candidate_call_is_charged_by_the_forward_peaks() -> None:
    from kforge_worker.checks.budget import ForwardPeaks

    ctx = EvalContext(request=None, channel=None, recorder=_NoCompileFailures(), result={}, torch=torch,
                      device=torch.device("cpu"))
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
    # Unmeasured (CPU, or before the first trial): the candidate's, as any exception of its call.
    assert ctx.candidate_failure("ModelNew.forward", oom).verdict == "runtime_error"
    gib = 1 << 30
    ctx.forward_peaks = ForwardPeaks(reference=6 * gib, candidate=6 * gib)
    same = ctx.candidate_failure("ModelNew.forward during timing", oom)
    assert same.verdict == "problem_error" and "does not fit this machine" in same.reason
    ctx.forward_peaks = ForwardPeaks(reference=6 * gib, candidate=30 * gib)
    assert ctx.candidate_failure("ModelNew.forward", oom).verdict == "runtime_error"
    # Any other exception stays the candidate's whatever the peaks.
    ctx.forward_peaks = ForwardPeaks(reference=6 * gib, candidate=6 * gib)
    assert ctx.candidate_failure("ModelNew.forward", ValueError("bad")).verdict == "runtime_error"
