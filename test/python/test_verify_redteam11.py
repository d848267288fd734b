"""Red team round 11 (2026-11-30, CPU, by a helper): what every other check holds fixed — the caller's autograd mode,
the thread's modes after a call, the caller's random stream, the output's container structure, values far beyond
1e2. See bench/verify/NOTES.md, "red team round 11".
"""

from __future__ import annotations

import random

import torch
import torch.nn as nn

from kforge_worker.checks import context
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport, scan_source


class _Ref(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gemm = nn.Linear(12, 8)

    def forward(self, x):
        return torch.relu(self.gemm(x))


def _ctx(ref: nn.Module, cand: nn.Module) -> context.VerifyContext:
    cand.load_state_dict(ref.state_dict())
    return context.VerifyContext(ref=ref, cand=cand,
                                 make_inputs=lambda s: [torch.rand(6, 12, generator=torch.Generator().manual_seed(s))],
                                 device=torch.device("cpu"), atol=1e-4, rtol=1e-4,
                                 scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(11))


class _BiasOffWithGrad(_Ref):
    def forward(self, x):
        if torch.is_grad_enabled():
            return torch.relu(x @ self.gemm.weight.t())
        return super().forward(x)


class _NoReluInInference(_Ref):
    def forward(self, x):
        y = self.gemm(x)
        return y if torch.is_inference_mode_enabled() else torch.relu(y)


class _BiasOffForGradInputs(_Ref):
    def forward(self, x):
        return torch.relu(nn.functional.linear(x, self.gemm.weight, None if x.requires_grad else self.gemm.bias))


class _WritesInputWithGrad(_Ref):
    def forward(self, x):
        if torch.is_grad_enabled() and not x.requires_grad:
            return torch.relu(self.gemm(x.mul_(1.0).clamp_(max=0.5)))
        return torch.relu(self.gemm(x.clamp(max=0.5)))


class _ClampedRef(_Ref):
    def forward(self, x):
        return torch.relu(self.gemm(x.clamp(max=0.5)))


class _NoGradInside(_Ref):
    """Honest: the whole forward under no_grad, whatever the caller's mode."""

    def forward(self, x):
        with torch.no_grad():
            return torch.addmm(self.gemm.bias, x, self.gemm.weight.t()).clamp_min_(0.0)


class _RefusesAutograd(_Ref):
    def forward(self, x):
        if torch.is_grad_enabled():
            raise RuntimeError("inference-only kernel")
        return super().forward(x)


def test_an_answer_that_depends_on_the_callers_autograd_mode_fails_grad_modes():
    """Right under no_grad, where every other check calls it; wrong with grad mode on, under inference_mode, or for
    inputs that require grad — or writing its input there. An honest no_grad-inside forward passes; one that
    refuses autograd is said, not failed."""
    from kforge_worker.checks.mode_checks import check_grad_modes

    torch.manual_seed(0)
    for cand, said in ((_BiasOffWithGrad(), "grad mode on (a plain call)"),
                       (_NoReluInInference(), "inference_mode"),
                       (_BiasOffForGradInputs(), "inputs that require grad")):
        r = check_grad_modes(_ctx(_Ref(), cand))
        assert r.outcome == "fail" and r.fail_verdict == "incorrect" and said in r.evidence, (type(cand), r)
    r = check_grad_modes(_ctx(_ClampedRef(), _WritesInputWithGrad()))
    assert r.outcome == "fail" and "wrote its input" in r.evidence, r
    assert check_grad_modes(_ctx(_Ref(), _NoGradInside())).outcome == "pass"
    assert check_grad_modes(_ctx(_Ref(), _Ref())).outcome == "pass"
    assert check_grad_modes(_ctx(_Ref(), _RefusesAutograd())).outcome == "warn"


class _LeavesGradOn(_Ref):
    def forward(self, x):
        out = super().forward(x)
        torch.set_grad_enabled(True)
        return out


def test_a_forward_that_leaves_grad_mode_on_is_named_and_put_back():
    """Inside the harness's no_grad block the exit would restore it; run() puts it back at once and names it for the
    integrity fingerprint (harness_integrity then fails the group)."""
    from kforge_worker.checks.integrity import _process_flags

    key = "autograd modes left changed by a candidate's forward (put back)"
    context.modes_left.clear()
    try:
        with torch.no_grad():
            context.run(_LeavesGradOn(), [torch.rand(2, 12)])
            assert not torch.is_grad_enabled()
        assert context.modes_left and "grad mode False -> True" in context.modes_left[0]
        assert _process_flags()[key] == context.modes_left
        context.modes_left.clear()
        context.run(_Ref(), [torch.rand(2, 12)])
        assert context.modes_left == [] and _process_flags()[key] == []
    finally:
        context.modes_left.clear()


class _Reseeds(_Ref):
    def forward(self, x):
        torch.default_generator.manual_seed(1234)
        return super().forward(x)


class _RestoresSaved(_Ref):
    def __init__(self) -> None:
        super().__init__()
        self._state = None

    def forward(self, x):
        if self._state is None:
            self._state = torch.get_rng_state()
        torch.set_rng_state(self._state)
        return super().forward(x)


class _Draws(_Ref):
    def forward(self, x):
        torch.rand(3)
        return super().forward(x)


class _ForkedDraw(_Ref):
    def forward(self, x):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(7)
            torch.rand(3)
        return super().forward(x)


def test_a_forward_that_sets_the_global_generator_fails_global_rng():
    """Called from two generator states, a reseed or a restored state leaves one state both times (cheating); a draw
    the reference does not make is said; fork_rng leaves the caller's stream as it was. The caller's own state is put
    back after the check."""
    from kforge_worker.checks.mode_checks import check_global_rng

    torch.manual_seed(5)
    for cand in (_Reseeds(), _RestoresSaved()):
        r = check_global_rng(_ctx(_Ref(), cand))
        assert r.outcome == "fail" and r.fail_verdict == "cheating", (type(cand), r)
    assert check_global_rng(_ctx(_Ref(), _Draws())).outcome == "warn"
    assert check_global_rng(_ctx(_Ref(), _ForkedDraw())).outcome == "pass"
    ctx = _ctx(_Ref(), _Ref())
    before = torch.get_rng_state()
    assert check_global_rng(ctx).outcome == "pass"
    assert torch.equal(torch.get_rng_state(), before)


class _Listed(_Ref):
    def forward(self, x):
        return [super().forward(x)]


class _Pair(nn.Module):
    def forward(self, x):
        return torch.max(x, dim=1)


class _PairAsList(nn.Module):
    def forward(self, x):
        v, i = torch.max(x, dim=1)
        return [v, i]


def test_an_output_in_another_container_than_the_references_fails_output_type():
    """Flattened, a one-element list holds the reference's tensor; a caller's model(x).sum() does not take it. A
    list where the reference returns torch's named tuple of the same length is the same structure."""
    from kforge_worker.checks.output_checks import _structure_difference, check_output_contract

    listed = {r.name: r for r in check_output_contract(_ctx(_Ref(), _Listed()))}
    assert listed["output_type"].outcome == "fail" and listed["output_type"].fail_verdict == "incorrect"
    assert "sequence of 1" in listed["output_type"].evidence
    x = torch.randn(3, 5)
    assert _structure_difference(_PairAsList()(x), _Pair()(x)) is None
    assert _structure_difference(_Pair()(x)[0], _Pair()(x)) is not None
    assert _structure_difference(1.0, torch.ones(())) is not None


class _Clamped(_Ref):
    def forward(self, x):
        return super().forward(x.clamp(-1000.0, 1000.0))


def test_values_far_beyond_1e2_are_among_the_distribution_probes():
    """A clamp at ±1000 holds on randn ×1, ×4, rows up to 1e2 and spikes at 1e2; randn×1e4 takes it apart. The rows
    variant stays the last judged (the timing's kind)."""
    from kforge_worker.checks.input_checks import check_input_distribution

    torch.manual_seed(1)
    r = check_input_distribution(_ctx(_Ref(), _Clamped()))
    assert r.outcome == "fail" and "randn×10000" in r.evidence, r
    ctx = _ctx(_Ref(), _Ref())
    assert check_input_distribution(ctx).outcome == "pass"
    assert ctx.notes["timed_variant_spec"]["kind"] == "rows"


def test_a_default_dtype_set_and_put_back_in_forward_is_said_not_failed():
    """torch.set_default_dtype is fingerprinted (a default left changed fails harness_integrity), so the call itself
    only warns, as set_num_threads does."""
    src = "import torch\ndef f():\n    torch.set_default_dtype(torch.float64)\n"
    report = scan_source(src, "c.py")
    tamper = [f for f in report.by_rule("tamper") if "set_default_dtype" in f.message]
    assert tamper and all(f.severity == "warn" for f in tamper), report.findings


class _BnRef(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gemm = nn.Linear(12, 8)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(self.gemm(x))


class _EvalDrift(_BnRef):
    """adv_eval_stats_drift: eval-mode outputs right for the statistics read, which then move by momentum 1e-6."""

    def forward(self, x):
        y = self.gemm(x)
        if self.training:
            return self.bn(y)
        bn = self.bn
        out = (y - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
        bn.running_mean.mul_(1 - 1e-6).add_(y.mean(0), alpha=1e-6)
        return out


def test_buffers_moved_by_eval_mode_calls_fail_state_buffers():
    """The reference's eval-mode calls leave its running statistics bitwise as loaded; a candidate that moves them,
    however little, fails. The reference's own BN passes."""
    from kforge_worker.checks.state_checks import check_state

    torch.manual_seed(4)
    drift = {r.name: r for r in check_state(_ctx(_BnRef(), _EvalDrift()))}
    assert drift["state_buffers"].outcome == "fail" and "eval-mode" in drift["state_buffers"].evidence
    assert "bn.running_mean" in drift["state_buffers"].evidence
    torch.manual_seed(4)
    assert {r.name: r for r in check_state(_ctx(_BnRef(), _BnRef()))}["state_buffers"].outcome == "pass"


class _BiasOffInEval(_Ref):
    def forward(self, x):
        if not self.training:
            return torch.relu(x @ self.gemm.weight.t())
        return super().forward(x)


def test_a_reference_without_mode_dependent_layers_is_still_checked_in_both_modes():
    """Linear + ReLU answers the same in train and eval mode; a candidate reading self.training was checked only in
    the training mode the harness builds it in."""
    from kforge_worker.checks.state_checks import check_state

    torch.manual_seed(6)
    wrong = {r.name: r for r in check_state(_ctx(_Ref(), _BiasOffInEval()))}
    assert wrong["state_train_eval"].outcome == "fail" and "eval mode" in wrong["state_train_eval"].evidence
    torch.manual_seed(6)
    same = {r.name: r for r in check_state(_ctx(_Ref(), _Ref()))}
    assert same["state_train_eval"].outcome == "pass" and "no mode-dependent layers" in same["state_train_eval"].evidence
