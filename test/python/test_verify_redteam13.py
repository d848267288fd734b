"""Red team round 13 (2026-11-30, CPU, by a helper): precision only where timed, statistics that cancel on a large
common offset, and what a candidate's load_state_dict does with the tensors it is handed. See bench/verify/NOTES.md,
"Round 13".
"""

from __future__ import annotations

import os
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

from kforge_worker.checks import context
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport
from kforge_worker.compare import compare_timed, timed_precision_bound
from kforge_worker.judge import Judge, JudgeChannel, summarize
from kforge_worker.off_distribution import variant
from kforge_worker.reference_process import Exporter


def _vctx(ref: nn.Module, cand: nn.Module, make, atol: float = 1e-4) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make, device=torch.device("cpu"), atol=atol,
                                 rtol=1e-4, scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(13))


# ------------------------------------------------------------------------------ precision only where timed
class _Head(nn.Module):
    """A classifier head: softmax over 400 classes keeps every output near 2.5e-3."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 400)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=1)


class _HalfWhenRewritten(_Head):
    """adv_timed_fp16_guarded: inputs written in place (the timing's sets) take a float16 GEMM."""

    def forward(self, x):
        if x._version > 0:
            y = F.linear(x.half(), self.fc.weight.half(), self.fc.bias.half()).float()
        else:
            y = self.fc(x)
        return torch.softmax(y, dim=1)


def _head_inputs(seed: int) -> list[torch.Tensor]:
    return [torch.randn(16, 64, generator=torch.Generator().manual_seed(seed))]


def _head_outputs(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(reference, its float64 evaluation, a float16 GEMM's answer, another fp32 summation order's)."""
    torch.manual_seed(0)
    ref = _Head()
    (x,) = _head_inputs(seed)
    with torch.no_grad():
        out = ref(x)
        out64 = torch.softmax(F.linear(x.double(), ref.fc.weight.double(), ref.fc.bias.double()), dim=1)
        half = torch.softmax(F.linear(x.half(), ref.fc.weight.half(), ref.fc.bias.half()).float(), dim=1)
        chunked = ref.fc.bias.expand(16, -1).clone()
        for k in range(0, 64, 16):
            chunked += x[:, k:k + 16] @ ref.fc.weight[:, k:k + 16].t()
        other = torch.softmax(chunked, dim=1)
    return out, out64, half, other


def test_a_timed_output_in_lower_precision_fails_where_the_pass_mark_alone_did_not():
    """A float16 GEMM under a softmax over 400 classes is inside the fp32 pass mark (1e-4 absolute), so every
    comparison of the timing's calls, which have no float64 evaluation, accepted it; the precision check's rule, in
    relative L2 distance from the reference, does not. Another fp32 summation order passes; pairs off the
    distribution stay the rows rule's."""
    out, out64, half, other = _head_outputs(1)
    ref_err = float((out.double() - out64).norm() / out64.norm())
    bound = timed_precision_bound(ref_err, torch.float32, tf32=False)
    assert bound is not None and bound < 2e-4
    assert compare_timed(0, half, out, 1e-4, 1e-4) == (True, None)  # the pass mark alone: accepted
    ok, why = compare_timed(0, half, out, 1e-4, 1e-4, precision=bound)
    assert not ok and "lower precision" in why, why
    assert compare_timed(0, other, out, 1e-4, 1e-4, precision=bound) == (True, None)
    assert compare_timed(0, half, out, 1e-4, 1e-4, off_distribution=True, precision=bound)[0]
    # TF32 allowed by the user: the dtype's floor is TF32's, and float16 rounding is inside it
    assert compare_timed(0, half, out, 1e-4, 1e-4, precision=timed_precision_bound(ref_err, torch.float32, True))[0]


def test_the_judge_holds_timed_pairs_to_the_precision_its_own_trials_measured(tmp_path):
    class Always(random.Random):
        def random(self) -> float:
            return 0.0  # every pair drawn

    channel = JudgeChannel()
    judge = Judge(channel.child_fd, str(tmp_path / "own"), rng=Always())
    judge.start(os.getpid(), dropout=False)
    judge.atol = judge.rtol = 1e-4
    exporter = Exporter(str(tmp_path))
    out, out64, half, other = _head_outputs(2)
    judge.trial_ready(2, [out], [out64], None)
    judge.judge_trial([{"tensor": exporter.put("t0", out.clone(), staging=True)}], torch.device("cpu"))
    assert judge.reference_error[0] < 1e-6
    for name, cand in (("other", other), ("half", half)):
        judge.called(0.1)
        judge.commit([{"tensor": exporter.put(name, cand, staging=True)}], [out], torch.device("cpu"), 0.1)
    judge.end()
    records = summarize(channel.finish(), channel.nonce)
    assert records["end"]["sampled"] == 2 and records["end"]["wrong"] == 1, records["end"]


def test_the_timing_like_loop_holds_get_inputs_values_to_the_precision_checks_bound():
    from kforge_worker.checks.input_checks import check_timed_outputs
    from kforge_worker.checks.output_checks import check_precision

    def judged(cand: nn.Module) -> tuple[str, str]:
        torch.manual_seed(0)
        ref = _Head()
        cand.load_state_dict(ref.state_dict())
        ctx = _vctx(ref, cand, _head_inputs)
        assert check_precision(ctx).outcome == "pass"  # fresh tensors: the fp32 path
        assert ctx.notes["timed_precision"][0] < 2e-4
        loop = check_timed_outputs(ctx, iters=6)
        return loop.outcome, loop.evidence

    outcome, evidence = judged(_HalfWhenRewritten())
    assert outcome == "fail" and "lower precision" in evidence, evidence
    assert judged(_Head())[0] == "pass"


# ------------------------------------------------------------------------------ a large common offset
class _RowNorm(nn.Module):
    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), eps=1e-5)


class _OnePassVariance(nn.Module):
    """adv_onepass_var: E[x²] − E[x]² in one read of the row."""

    def forward(self, x):
        m = x.mean(dim=-1, keepdim=True)
        var = ((x * x).mean(dim=-1, keepdim=True) - m * m).clamp_min(0)
        return (x - m) * torch.rsqrt(var + 1e-5)


class _TwoPass(nn.Module):
    def forward(self, x):
        d = x - x.mean(dim=-1, keepdim=True)
        return d * torch.rsqrt((d * d).mean(dim=-1, keepdim=True) + 1e-5)


def test_values_on_a_large_common_offset_are_among_the_distribution_probes():
    """Every other variant is centred near zero (or is get_inputs()' own [0, 1)), where a one-pass variance does not
    cancel; on a common offset of 100× the values' magnitude it loses percents, while two passes stay exact."""
    from kforge_worker.checks.input_checks import check_input_distribution

    (x,) = variant({"kind": "offset"}, [torch.rand(4, 256)], 0, torch.device("cpu"))
    assert float(x.min()) >= 99.0 and float(x.max() - x.min()) <= 1.0
    make = lambda s: [torch.rand(8, 512, generator=torch.Generator().manual_seed(s))]  # noqa: E731
    onepass = check_input_distribution(_vctx(_RowNorm(), _OnePassVariance(), make))
    assert onepass.outcome == "fail" and "common offset" in onepass.evidence, onepass
    assert check_input_distribution(_vctx(_RowNorm(), _TwoPass(), make)).outcome == "pass"


# ------------------------------------------------------------------------------ what a loader is handed
class _Lin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gemm = nn.Linear(12, 8)

    def forward(self, x):
        return torch.relu(self.gemm(x))


class _WritesBack(_Lin):
    """adv_load_writes_back: weights folded at construction; every tensor a load hands it is kept, and its own
    weights are written into all of them (the reference's parameters, when handed ref.state_dict() itself)."""

    def __init__(self) -> None:
        super().__init__()
        self._w, self._b = self.gemm.weight.detach().clone(), self.gemm.bias.detach().clone()
        self._held: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _load_from_state_dict(self, state_dict, prefix, *args):
        w, b = state_dict.get(prefix + "gemm.weight"), state_dict.get(prefix + "gemm.bias")
        if w is not None and b is not None:
            self._held.append((w, b))
        super()._load_from_state_dict(state_dict, prefix, *args)

    def forward(self, x):
        with torch.no_grad():
            for w, b in self._held + [(self.gemm.weight, self.gemm.bias)]:
                w.copy_(self._w)
                b.copy_(self._b)
        return torch.relu(F.linear(x, self._w, self._b))


def test_a_loader_is_handed_copies_and_one_that_writes_them_back_fails_state_reload():
    """sync_parameters handed ModelNew.load_state_dict the reference's own tensors (state_dict() shares their
    storage): a loader that kept them wrote the reference's weights from then on, and one that wrote its folded weights
    into state_reload's dict made the check compare the candidate with itself. The loader now gets copies, and a
    load that writes what it was handed is said."""
    from kforge_worker.checks.state_checks import check_state
    from kforge_worker.pipeline import sync_parameters

    torch.manual_seed(0)
    ref = _Lin()
    torch.manual_seed(0)
    cand = _WritesBack()
    sync_parameters(ref, cand)
    held_w = cand._held[0][0]
    assert held_w.untyped_storage().data_ptr() != ref.gemm.weight.untyped_storage().data_ptr()
    make = lambda s: [torch.rand(6, 12, generator=torch.Generator().manual_seed(s))]  # noqa: E731
    reload = {r.name: r for r in check_state(_vctx(ref, cand, make))}["state_reload"]
    assert reload.outcome == "fail", reload
    torch.manual_seed(0)
    honest = _Lin()
    sync_parameters(ref, honest)
    assert {r.name: r for r in check_state(_vctx(ref, honest, make))}["state_reload"].outcome == "pass"


# ------------------------------------------------------------------------------ autocast left entered
def test_autocast_entered_and_left_behind_is_a_fingerprint_change():
    """adv_autocast_left: autocast entered at import and never left puts the worker's copy of the reference in the
    same low precision as the candidate (precision then measures against a reference as imprecise as itself); a
    context the forward enters and leaves is not a change."""
    from kforge_worker.checks.integrity import IntegritySnapshot

    snap = IntegritySnapshot.take()
    amp = torch.autocast("cpu", dtype=torch.bfloat16)
    amp.__enter__()
    try:
        problems = snap.diff(thorough=False)
    finally:
        amp.__exit__(None, None, None)
    assert any("torch.is_autocast_enabled('cpu') changed from False to True" in p for p in problems), problems
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pass
    assert snap.diff(thorough=False) == []


# ------------------------------------------------------------------------------ a get_inputs() that never varies
def test_inputs_get_inputs_never_varies_are_rolled_afresh_for_every_timed_call():
    """adv_content_memo_seeded: a get_inputs() that reseeds its own generator gave every timed call the same values,
    and a memo confirmed element by element answered them all. Such inputs are now rolled by a secret offset at every
    refill (the same values, a new arrangement) when the reference accepts them; inputs that vary are untouched."""
    from kforge_worker.timed_inputs import FreshInputPool

    seeds = iter(range(1000, 2000))

    def fixed(_seed: int) -> list[torch.Tensor]:
        return [torch.rand(8, 16, generator=torch.Generator().manual_seed(0)), torch.arange(4)]

    pool = FreshInputPool(fixed, lambda: next(seeds), sets=2, accepts=lambda given, rolled: True)
    assert pool.repeats == [0] and pool.rolled
    seen = []
    for _ in range(6):
        pool.advance()
        x = pool.ref_inputs()[0]
        assert torch.equal(x.reshape(-1).sort().values, fixed(0)[0].reshape(-1).sort().values)  # the same values
        assert torch.equal(pool.cand_inputs()[0], x) and torch.equal(pool.ref_inputs()[1], torch.arange(4))
        seen.append(x.clone())
    assert all(not torch.equal(a, b) for a, b in zip(seen, seen[1:]))
    refused = FreshInputPool(fixed, lambda: next(seeds), sets=2, accepts=lambda given, rolled: False)
    assert refused.repeats == [0] and not refused.rolled and "repeat" in refused.describe()
    drawn = FreshInputPool(lambda s: [torch.rand(8, 16, generator=torch.Generator().manual_seed(s))],
                           lambda: next(seeds), sets=2, accepts=lambda given, rolled: True)
    assert drawn.repeats == [] and not drawn.rolled
