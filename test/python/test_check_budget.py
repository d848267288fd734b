"""Cost-bounded checks (issue 17): the check budget's arithmetic, the float64 evaluation bounded by it (the whole
batch, a proven window of rows, or none with the reason), a problem that cannot fit reported as the problem's
error, and progress lines inside the checks phase. Budgets are forced small (KFORGE_CHECK_MEMORY,
KFORGE_MEMORY_AVAILABLE, a Budget built by hand) instead of allocating anything large."""

from __future__ import annotations

import random

import pytest
import torch
from conftest import candidate, evaluate, make_request, problem
from torch import nn

from kforge_worker.checks import budget as budget_mod
from kforge_worker.checks import context, float64
from kforge_worker.checks.budget import Budget, human, nbytes, problem_footprint, widened_bytes
from kforge_worker.checks.float64 import evaluate_float64, float64_copy
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.judge import rounding_only
from kforge_worker.checks.output_checks import check_precision
from kforge_worker.checks.static_scan import ScanReport

MB = 1 << 20


def _forward(model: nn.Module, inputs: list) -> object:
    with torch.no_grad():
        return model(*inputs)


def _linear(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 16), nn.ReLU())


def _inputs(batch: int = 64, seed: int = 1) -> list[torch.Tensor]:
    return [torch.randn(batch, 32, generator=torch.Generator().manual_seed(seed))]


# ------------------------------------------------------------------------------------------- the arithmetic
def test_the_budget_is_one_and_a_half_footprints_with_a_floor_capped_by_what_is_free() -> None:
    big = Budget(footprint=1000 * MB, available=None)
    assert big.limit == 1500 * MB and big.fits(1500 * MB) and not big.fits(1500 * MB + 1)
    tiny = Budget(footprint=10, available=None)
    assert tiny.limit == budget_mod.FLOOR  # a tiny problem's checks are never squeezed
    # What is free caps it (HEADROOM of it), and bytes the check already holds are already out of the free.
    scarce = Budget(footprint=1000 * MB, available=1000 * MB)
    assert scarce.allowance == int(0.8 * 1000 * MB)
    assert not scarce.fits(900 * MB) and scarce.fits(900 * MB, held=200 * MB)
    capped = Budget(footprint=1000 * MB, available=None, cap=5 * MB)
    assert capped.limit == 5 * MB and not capped.fits(6 * MB)
    assert "over the check budget of 5.2 MB (KFORGE_CHECK_MEMORY=5.2 MB)" in capped.over(6 * MB, "a float64 pass")
    assert human(25.04e9) == "25.0 GB" and human(3.1e6) == "3.1 MB" and human(12) == "12 B"


def test_footprints_count_each_tensor_once_at_the_runs_precision() -> None:
    model = _linear()
    shared = nn.Linear(4, 4, bias=False)
    tied = nn.Sequential(shared, shared)  # the same weight twice is held once
    assert nbytes(tied) == 16 * 4
    x = torch.randn(8, 32)
    assert nbytes([x, x]) == 8 * 32 * 4
    assert nbytes([x], torch.float16) == 8 * 32 * 2  # --precision fp16 halves it
    assert nbytes([torch.arange(10)], torch.float16) == 80  # integers are not cast
    assert widened_bytes([x, torch.arange(3)]) == 8 * 32 * 8  # only floating tensors are widened
    assert budget_mod.float64_model_bytes(model) == (32 * 16 + 16) * 8


def test_byte_counts_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "512M")
    monkeypatch.setenv("KFORGE_MEMORY_AVAILABLE", "2e9")
    b = Budget.for_problem("cpu", _inputs())
    assert b.cap == 512 * MB and b.available == 2_000_000_000
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "lots")
    assert Budget.for_problem("cpu", _inputs()).cap is None  # unreadable: the rule stands


def test_the_host_has_a_measured_amount_free() -> None:
    free = budget_mod.available_bytes("cpu")
    assert free is not None and free > 0


def test_a_problem_is_measured_on_meta_without_allocating() -> None:
    class Problem:
        class Model(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.fc = nn.Linear(n, n)

            def forward(self, x):
                return self.fc(x)

        @staticmethod
        def get_inputs():
            return [torch.randn(1 << 20, 1024)]  # 4 GB in fp32: on meta it costs nothing

        @staticmethod
        def get_init_inputs():
            return [1024]

    fp = problem_footprint(Problem)
    assert fp is not None
    assert fp.inputs == (1 << 30) * 4 and fp.parameters == (1024 * 1024 + 1024) * 4 and fp.outputs == (1 << 30) * 4
    assert problem_footprint(Problem, torch.float16).inputs == (1 << 30) * 2
    # The reference process's own guard measures no forward (its outputs come only in trials, after the worker's
    # check of the whole footprint): the same inputs and parameters, outputs unmeasured, the forward never run.
    calls = []
    Problem.Model.forward = lambda self, x: calls.append(x) or self.fc(x)
    quick = problem_footprint(Problem, forward=False)
    assert quick == budget_mod.Footprint(inputs=fp.inputs, parameters=fp.parameters, outputs=None)
    assert quick.total == fp.inputs + fp.parameters and calls == []
    assert problem_footprint(Problem).outputs == fp.outputs and len(calls) == 1


# ------------------------------------------------------------------------------ the bounded float64 evaluation
def _small_budget() -> Budget:
    """Room for the float64 parameters and ~16 of 64 rows of the test Linear, not for the whole batch."""
    return Budget(footprint=0, available=None, cap=20_000)


def test_a_window_of_rows_gives_the_full_passs_values_and_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(float64, "MIN_SAMPLE_ELEMENTS", 64)
    model, inputs = _linear(), _inputs()
    ref = [_forward(model, inputs)]
    full = evaluate_float64(model, inputs, ref, budget=Budget(0, None), forward=_forward)
    assert full.outputs is not None and not full.sampled and full.outputs[0].shape == (64, 16)
    part = evaluate_float64(model, inputs, ref, budget=_small_budget(), forward=_forward, rng=random.Random(3))
    assert part.sampled and part.outputs is not None, part.note
    lo, hi = part.rows
    assert 0 < hi - lo < 64 and part.outputs[0].shape == (hi - lo, 16) and part.outputs[0].dtype == torch.float64
    assert "rows" in part.note and "a full float64 pass needs" in part.note
    assert torch.allclose(part.outputs[0], full.outputs[0][lo:hi], rtol=0, atol=1e-12)
    # The same verdict on an honest and on a low-precision answer, from the window as from the whole batch.
    honest = ref[0]
    coarse = ref[0].half().float()
    for cand, expected in ((honest, True), (coarse, False)):
        whole_err = float((cand.double() - full.outputs[0]).norm() / full.outputs[0].norm())
        window_err = float((part.take(cand).double() - part.outputs[0]).norm() / part.outputs[0].norm())
        ref_err = float((ref[0].double() - full.outputs[0]).norm() / full.outputs[0].norm())
        assert (whole_err <= 10 * ref_err + 5e-5) is expected
        assert (window_err <= 10 * ref_err + 5e-5) is expected


def test_a_window_is_refused_when_the_rows_depend_on_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(float64, "MIN_SAMPLE_ELEMENTS", 64)
    torch.manual_seed(0)
    bn = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16)).train()
    inputs = _inputs()
    ref = [_forward(bn, [inputs[0].clone()])]
    stats = bn[1].running_mean.clone(), bn[1].num_batches_tracked.clone()
    view = evaluate_float64(bn, inputs, ref, budget=_small_budget(), forward=_forward)
    assert view.outputs is None
    assert "depend on the rest of the batch" in view.note and "a full float64 pass needs" in view.note
    # The separability pass did not step BatchNorm's running statistics.
    assert torch.equal(bn[1].running_mean, stats[0]) and torch.equal(bn[1].num_batches_tracked, stats[1])

    class Centered(nn.Module):
        def forward(self, x):
            return x - x.mean(0)

    centered = Centered()
    view = evaluate_float64(centered, inputs, [_forward(centered, inputs)], budget=Budget(0, None, cap=9_000),
                            forward=_forward)
    assert view.outputs is None and "depend on the rest of the batch" in view.note

    class Total(nn.Module):
        def forward(self, x):
            return x.sum(0)

    total = Total()
    view = evaluate_float64(total, inputs, [_forward(total, inputs)], budget=Budget(0, None, cap=100),
                            forward=_forward)
    assert view.outputs is None and "does not have the batch's 64 rows" in view.note


def test_too_few_rows_for_the_statistics_is_no_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(float64, "MIN_SAMPLE_ELEMENTS", 60 * 16)  # 60 of 128 rows needed; ~16 fit
    model, inputs = _linear(), _inputs(batch=128)
    view = evaluate_float64(model, inputs, [_forward(model, inputs)], budget=_small_budget(), forward=_forward)
    assert view.outputs is None and "even 60 of 128 rows" in view.note


def test_an_output_under_the_minimum_sample_is_sampled_over_half_its_rows() -> None:
    # 64 rows of 16 outputs: the whole output (1024 elements) is under MIN_SAMPLE_ELEMENTS, and ~16 rows fit the
    # budget. Asking for the whole output would leave no float64 at all; half of it is asked instead.
    assert float64.MIN_SAMPLE_ELEMENTS > 64 * 16
    assert float64.min_sample(64, 16) == 512 and float64.min_sample(1 << 20, 16) == float64.MIN_SAMPLE_ELEMENTS
    model, inputs = _linear(), _inputs()
    ref = [_forward(model, inputs)]
    view = evaluate_float64(model, inputs, ref, budget=_small_budget(), forward=_forward)
    assert view.outputs is None and "even 32 of 64 rows (≥512 output elements)" in view.note
    roomier = Budget(footprint=0, available=None, cap=30_000)
    view = evaluate_float64(model, inputs, ref, budget=roomier, forward=_forward, rng=random.Random(5))
    assert view.sampled and view.outputs is not None, view.note
    lo, hi = view.rows
    assert 32 <= hi - lo < 64


def test_the_float64_copy_never_holds_a_native_copy_and_keeps_ties() -> None:
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.ReLU(), shared, nn.BatchNorm1d(4))
    copy64 = float64_copy(model)
    assert all(p.dtype == torch.float64 for p in copy64.parameters())
    assert copy64[0].weight is copy64[2].weight  # a tied weight stays tied
    assert copy64[3].num_batches_tracked.dtype == torch.int64
    assert model[0].weight.dtype == torch.float32  # the original is untouched
    x = torch.randn(5, 4)
    assert torch.allclose(copy64(x.double()), model(x).double(), atol=1e-5)


# ----------------------------------------------------------------------------------------- the checks use it
class _Recorder:
    """Batch sizes of every float64 forward of the reference (a function hook: deepcopy keeps functions as they
    are, so float64 copies of the reference record here too)."""

    def __init__(self, model: nn.Module) -> None:
        self.batches: list[int] = []

        def hook(module: nn.Module, args: tuple) -> None:
            if args and args[0].dtype == torch.float64:
                self.batches.append(int(args[0].shape[0]))

        model.register_forward_pre_hook(hook)


class _Half(nn.Module):
    """The same Linear computed in fp16: lower precision than the dtype allows."""

    def __init__(self, ref: nn.Module) -> None:
        super().__init__()
        self.ref = ref

    def forward(self, x):
        fc = self.ref[0]
        return torch.relu(nn.functional.linear(x.half(), fc.weight.half(), fc.bias.half()).float())


def _context(ref: nn.Module, cand: nn.Module) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=lambda seed: _inputs(64, seed),
                                 device=torch.device("cpu"), atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(7))


def test_a_tiny_budget_makes_the_precision_check_sample_rows_with_the_same_verdict(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(float64, "MIN_SAMPLE_ELEMENTS", 64)
    ref = _linear()
    full_honest = check_precision(_context(ref, _linear()))
    full_coarse = check_precision(_context(ref, _Half(_linear())))
    assert full_honest.outcome == "pass" and full_coarse.outcome == "fail"

    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "20000")
    seen = _Recorder(ref)
    honest = check_precision(_context(ref, _linear()))
    coarse = check_precision(_context(ref, _Half(_linear())))
    assert honest.outcome == "pass" and coarse.outcome == "fail", (honest.evidence, coarse.evidence)
    assert "float64 on rows" in honest.evidence and "float64 on rows" in coarse.evidence
    assert seen.batches and all(b < 64 for b in seen.batches)  # never a float64 pass on the whole batch


def test_a_candidate_precise_only_inside_the_window_is_not_forgiven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(float64, "MIN_SAMPLE_ELEMENTS", 64)
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "20000")
    ref = _linear()
    ctx = _context(ref, ref)
    inputs = _inputs()
    ref_out = _forward(ref, inputs)
    assert rounding_only(ctx, inputs, ref_out.clone(), ref_out)
    skipped_rows = ref_out.clone()
    skipped_rows[::2] = 0  # half the rows never computed: in every possible window, and outside it
    assert not rounding_only(ctx, inputs, skipped_rows, ref_out)


def test_without_a_window_the_precision_check_is_skipped_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    bn = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16)).train()
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "100")
    result = check_precision(_context(bn, bn))
    assert result.outcome == "skip" and result.fail_verdict == "incorrect"
    assert "no float64 evaluation within the check budget" in result.evidence
    assert "float64 copy" in result.evidence or "full float64 pass needs" in result.evidence


# ------------------------------------------------------------------------------------------- the pipeline
_BIG_LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.randn(512, 256)]

def get_init_inputs():
    return [256]
'''

_BIG_LINEAR_NEW = _BIG_LINEAR.replace("class Model(", "class ModelNew(").split("def get_inputs")[0]


@pytest.mark.parametrize("isolated", [True, False])
def test_the_trials_sample_rows_under_a_small_budget_and_say_so(cache_dir: str, tmp_path, isolated: bool,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # Full float64 pass: ~3.6 MB (parameters 0.5 MB, input 1 MB, outputs 2 MB); 256 of 512 rows are needed.
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "3000000")
    prob, cand = tmp_path / "big_linear.py", tmp_path / "big_linear_new.py"
    prob.write_text(_BIG_LINEAR)
    cand.write_text(_BIG_LINEAR_NEW)
    request = make_request(str(prob), str(cand), cache_dir)
    request["options"]["referenceProcess"] = isolated
    result, _ = evaluate(request)
    assert result["verdict"] == "correct", result["reason"]
    scope = next(c for c in result["checks"] if c["name"] == "float64_scope")
    assert scope["outcome"] == "pass" and "3 of 3 trials: float64 on rows" in scope["evidence"], scope
    for trial in result["trials"]:
        assert trial["outputs"][0]["candVsFp64"]["relL2"] is not None
        assert trial["outputs"][0]["refVsFp64"]["relL2"] < 1e-5


@pytest.mark.parametrize("isolated", [True, False])
def test_a_float64_pass_that_cannot_be_bounded_is_skipped_not_charged(cache_dir: str, isolated: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "100")
    request = make_request(problem("tiny_bn"), candidate("bn_correct"), cache_dir)
    request["options"]["referenceProcess"] = isolated
    result, _ = evaluate(request)
    assert result["verdict"] == "correct", result["reason"]
    scope = next(c for c in result["checks"] if c["name"] == "float64_scope")
    assert scope["outcome"] == "skip" and "no float64 evaluation from trial 0 on" in scope["evidence"]
    assert "needs ~" in scope["evidence"] and "over the check budget" in scope["evidence"]
    assert all(t["outputs"][0]["refVsFp64"]["relL2"] is None for t in result["trials"])


def test_a_problem_that_cannot_fit_is_the_problems_error_with_the_numbers(cache_dir: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_MEMORY_AVAILABLE", "500")
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir))
    assert result["verdict"] == "problem_error"
    # fp32: inputs 4x16, parameters 8x16 + 8, outputs 4x8
    assert result["reason"] == ("problem needs ~928 B (inputs 256 B + parameters 544 B + outputs 128 B, one copy "
                                "each), 500 B available on the host")
    assert result["trials"] == []  # nothing of it ran
    monkeypatch.setenv("KFORGE_MEMORY_AVAILABLE", "1000")  # it fits: the run goes on
    result, _ = evaluate(make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir))
    assert result["verdict"] == "correct", result["reason"]


def test_running_out_of_memory_outside_the_guards_is_the_problems_not_kforges(
        cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from kforge_worker import pipeline

    def no_memory(self, inputs):  # kforge's own copy of the inputs for the candidate
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you "
                           "tried to allocate 12884901888 bytes. Error code 12 (Cannot allocate memory)")

    monkeypatch.setattr(pipeline.EvalContext, "clone_inputs", no_memory)
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir)
    request["options"]["referenceProcess"] = False
    result, _ = evaluate(request)
    assert result["verdict"] == "problem_error"
    assert result["reason"].startswith("the problem does not fit this machine's memory")
    assert pipeline._out_of_memory(MemoryError()) and not pipeline._out_of_memory(ValueError("bad shape"))


# ------------------------------------------------------------------------------------------------ progress
def test_every_check_group_says_when_it_starts(cache_dir: str) -> None:
    request = make_request(problem("tiny_linear"), candidate("linear_correct"), cache_dir,
                           checks=["output_contract", "tolerance", "precision"])
    result, messages = evaluate(request, use_checks=True)
    assert result["verdict"] == "correct", result["reason"]
    lines = [(m["detail"], m["fraction"]) for m in messages if m.get("type") == "progress" and m["stage"] == "verify"]
    groups = [(d, f) for d, f in lines if "/3)" in d]
    from kforge_worker.checks.verifier import RUNTIME_CHECKS

    order = [name for name in RUNTIME_CHECKS if name in ("output_contract", "tolerance", "precision")]
    assert groups == [(f"{name} ({k + 1}/3)", pytest.approx(k / 3)) for k, name in enumerate(order)]


def test_the_trials_pass_mark_with_a_sampled_float64_window() -> None:
    from kforge_worker.compare import compare_output

    torch.manual_seed(0)
    truth = torch.randn(64, 16, dtype=torch.float64)
    ref = (truth + 1e-3 * torch.randn(64, 16, dtype=torch.float64)).float()  # a reference off by ~1e-3
    rows = (16, 32)
    window64 = truth[16:32]
    # As accurate as the reference everywhere (another rounding of the truth): passes inside and outside.
    other = (truth + 1e-3 * torch.randn(64, 16, dtype=torch.float64)).float()
    verdict = compare_output(0, other, ref, window64, 1e-4, 1e-4, rows)
    assert verdict.passed, verdict.message
    assert verdict.json["refVsFp64"]["relL2"] == pytest.approx(
        float((ref[16:32].double() - window64).norm() / window64.norm()), rel=1e-9)  # measured on the window only
    # Off by 0.05 in one row outside the window: far beyond twice the reference's worst error there.
    wrong = other.clone()
    wrong[40] += 0.05
    assert not compare_output(0, wrong, ref, window64, 1e-4, 1e-4, rows).passed
    # The same miss inside the window is judged against float64 there.
    wrong_inside = other.clone()
    wrong_inside[20] += 0.05
    assert not compare_output(0, wrong_inside, ref, window64, 1e-4, 1e-4, rows).passed


def test_an_out_of_memory_is_the_candidates_only_when_it_asks_more_than_the_reference():
    from kforge_worker.checks.budget import ForwardPeaks, out_of_memory_not_the_candidates

    gib = 1 << 30
    # No measurement (CPU, or the first trial never ran): the candidate's, as any other exception.
    assert out_of_memory_not_the_candidates(None) is None
    # A candidate whose forward needs what the reference's needs did not cause the shortage.
    same = out_of_memory_not_the_candidates(ForwardPeaks(reference=6 * gib, candidate=6 * gib))
    assert same is not None and "does not fit this machine" in same and "6.4 GB" in same
    # One that asks far more than the reference did.
    assert out_of_memory_not_the_candidates(ForwardPeaks(reference=6 * gib, candidate=20 * gib)) is None


def test_the_judge_of_a_miss_may_use_the_memory_the_device_has_free(monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch of one has no rows to sample: under the footprint rule the float64 pass is refused, and a correct
    # candidate's rounding would stand as a miss. The judge's pass may use what is free instead.
    monkeypatch.setattr(budget_mod, "FACTOR", 1.0)
    monkeypatch.setattr(budget_mod, "FLOOR", 0)
    monkeypatch.setenv("KFORGE_MEMORY_AVAILABLE", "1e9")
    ref = _linear()
    ctx = _context(ref, ref)
    inputs = _inputs(batch=1)
    ref_out = _forward(ref, inputs)
    assert float64.for_check(ctx, inputs, ref_out).outputs is None
    assert float64.for_check(ctx, inputs, ref_out, free_memory=True).outputs is not None
    rounded = ref_out * (1 + 1e-7 * torch.randn(ref_out.shape, generator=torch.Generator().manual_seed(3)))
    assert rounding_only(ctx, inputs, rounded, ref_out)
    skipped = ref_out.clone()
    skipped[:, ::2] = 0  # work not done: still a miss
    assert not rounding_only(ctx, inputs, skipped, ref_out)
    # An operator's explicit limit still rules.
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "100")
    assert float64.for_check(ctx, inputs, ref_out, free_memory=True).outputs is None


def test_the_trials_float64_pass_refused_by_the_footprint_rule_runs_in_the_memory_that_is_free(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A batch norm in training couples the rows: no window can be sampled, so under the footprint rule the trials
    # would have no float64 view and a correct candidate's rounding would be charged as a miss.
    monkeypatch.setattr(budget_mod, "FACTOR", 1.0)
    monkeypatch.setattr(budget_mod, "FLOOR", 0)
    monkeypatch.setattr(float64, "MIN_SAMPLE_ELEMENTS", 64)
    monkeypatch.setenv("KFORGE_MEMORY_AVAILABLE", "1e9")
    torch.manual_seed(0)
    bn = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16)).train()
    twin = nn.Sequential(nn.Linear(32, 16), nn.BatchNorm1d(16)).train()
    twin.load_state_dict(bn.state_dict())
    inputs = _inputs()
    lockstep = float64.LockstepFloat64(bn, torch.device("cpu"), _forward)
    lockstep.before_reference(inputs)
    ref = [_forward(bn, [inputs[0].clone()])]
    view = lockstep.evaluate(inputs, ref)
    assert view is not None and view.rows is None, lockstep.note
    assert "free" in view.note and "depend on the rest of the batch" in view.note
    assert float((view.outputs[0] - ref[0].double()).abs().max()) < 1e-5
    # The float64 copy was stepped once, as the reference was: the running statistics stay in lockstep.
    assert torch.allclose(lockstep.model64[1].running_mean, bn[1].running_mean.double(), atol=1e-6)
    # An operator's explicit limit still rules: the trials go on without the view.
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", "100")
    strict = float64.LockstepFloat64(twin, torch.device("cpu"), _forward)
    strict.before_reference(inputs)
    assert strict.evaluate(inputs, [_forward(twin, [inputs[0].clone()])]) is None
    assert strict.note is not None and "KFORGE_CHECK_MEMORY" in strict.note
