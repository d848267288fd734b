"""Red team round 14 (2026-11-30, CPU, by a helper): candidate code run by the caller's own operations on re-typed
inputs, torch functions replaced outside the watched modules, caches keyed on a sample of the weights, and the
worker's own priority. See bench/verify/NOTES.md, "Session 2026-11-30 (fifth)".
"""

from __future__ import annotations

import os
import random

import torch
import torch.nn as nn

from kforge_worker.checks import context
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport


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
                                 rng=random.Random(14))


# ------------------------------------------------------------------------------ inputs re-typed by the candidate
_CALLS: list[str] = []


class _Watched(torch.Tensor):
    """adv_input_class_precompute: any torch operation on the re-typed input runs this."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _CALLS.append(getattr(func, "__name__", "?"))
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class _Retyping(_Ref):
    def forward(self, x):
        out = super().forward(x)
        x.__class__ = _Watched
        return out


def test_an_input_the_candidate_retyped_gets_its_class_back_before_the_harness_touches_it():
    """The class is put back right after the call (named for the fingerprint), so the caller's next copy_ runs none of
    the candidate's code; the reference's calls are not looked at."""
    torch.manual_seed(0)
    ref, cand = _Ref(), _Retyping()
    cand.load_state_dict(ref.state_dict())
    x = torch.rand(6, 12)
    before = list(context.retyped)
    try:
        context.run(cand, [x])
        assert type(x) is torch.Tensor
        assert len(context.retyped) == len(before) + 1 and "[0]" in context.retyped[-1]
        _CALLS.clear()
        x.copy_(torch.rand(6, 12))
        assert _CALLS == []
        context.run(ref, [x])
        assert len(context.retyped) == len(before) + 1
    finally:
        context.retyped[:] = before


class _RingRetyping(_Ref):
    """adv_output_ring_retype: a ring of two kept buffers, each output a new view of one; earlier outputs re-typed
    to a subclass whose untyped_storage() raises."""

    def __init__(self) -> None:
        super().__init__()
        self.ring, self.turn, self.given = [torch.empty(6, 8), torch.empty(6, 8)], 0, []

    def forward(self, x):
        for out in self.given:
            object.__dict__["__class__"].__set__(out, _Opaque)
        buf = self.ring[self.turn % 2]
        self.turn += 1
        buf.copy_(super().forward(x))
        out = buf.view(buf.shape)
        self.given = [out]
        return out


class _Opaque(torch.Tensor):
    def untyped_storage(self):
        raise RuntimeError("no storage")


def test_outputs_of_earlier_calls_retyped_later_get_their_class_back():
    """The outputs a caller keeps are asked where they live (the timing-like loop's held outputs): a later call that
    re-types them is put back, and named."""
    torch.manual_seed(0)
    ref, cand = _Ref(), _RingRetyping()
    cand.load_state_dict(ref.state_dict())
    before = list(context.retyped)
    try:
        first = context.run(cand, [torch.rand(6, 12)])
        context.run(cand, [torch.rand(6, 12)])
        assert type(first) is torch.Tensor and first.untyped_storage().data_ptr() == cand.ring[0].data_ptr()
        assert len(context.retyped) == len(before) + 1 and "had returned" in context.retyped[-1]
    finally:
        context.retyped[:] = before


class _RetypesLastInputs(_Ref):
    """Re-types the inputs of its previous call (a rotating set the caller will write again) during the next one."""

    def __init__(self) -> None:
        super().__init__()
        self.last: list[torch.Tensor] = []

    def forward(self, x):
        for t in self.last:
            object.__dict__["__class__"].__set__(t, _Watched)
        self.last = [x]
        return super().forward(x)


def test_inputs_of_an_earlier_call_retyped_later_get_their_class_back():
    torch.manual_seed(0)
    ref, cand = _Ref(), _RetypesLastInputs()
    cand.load_state_dict(ref.state_dict())
    sets = [torch.rand(6, 12), torch.rand(6, 12)]
    before = list(context.retyped)
    try:
        context.run(cand, [sets[0]])
        context.run(cand, [sets[1]])
        assert all(type(t) is torch.Tensor for t in sets)
        assert len(context.retyped) == len(before) + 1
        _CALLS.clear()
        sets[0].copy_(torch.rand(6, 12))
        assert _CALLS == []
    finally:
        context.retyped[:] = before


class _Stubborn(_Watched):
    """Its own `__class__` property: an assignment to x.__class__ reaches this setter, which refuses."""

    @property
    def __class__(self):
        return torch.Tensor

    @__class__.setter
    def __class__(self, value):
        _CALLS.append("refused")


def test_a_subclass_that_refuses_class_assignment_still_gets_its_class_put_back():
    from kforge_worker.tensor_classes import classes_of, put_back

    x = torch.zeros(3)
    handed = classes_of([x])
    object.__dict__["__class__"].__set__(x, _Stubborn)
    _CALLS.clear()
    assert put_back([x], handed) == [0] and type(x) is torch.Tensor and _CALLS == []


def test_the_timings_refill_never_writes_into_a_retyped_input_and_names_it():
    from kforge_worker.timed_inputs import refill, written_inputs

    kept = torch.zeros(4, 4)
    kept.__class__ = _Watched
    fresh = torch.rand(4, 4)
    _CALLS.clear()
    assert written_inputs([kept], [fresh]) is not None and "class" in written_inputs([kept], [fresh])
    out = refill([kept], [fresh])
    assert _CALLS == [], _CALLS
    assert out[0] is not kept and type(out[0]) is torch.Tensor and torch.equal(out[0], fresh)
    assert written_inputs(out, [fresh]) is None


# ------------------------------------------------------------------------------ torch functions outside the list
def test_a_function_of_any_torch_module_replaced_is_a_fingerprint_change():
    """torch.linalg.vector_norm (the harness's row comparison) and torch.special.erf (a reference's) were outside the
    modules whose functions are watched."""
    from kforge_worker.checks.integrity import IntegritySnapshot

    snap = IntegritySnapshot.take()
    for module, name in ((torch.linalg, "vector_norm"), (torch.special, "erf")):
        original = getattr(module, name)
        setattr(module, name, lambda *a, **k: original(*a, **k))
        try:
            problems = snap.diff(thorough=False)
        finally:
            setattr(module, name, original)
        assert any(f"{module.__name__}.{name} was rebound" in p for p in problems), problems
    assert snap.diff(thorough=False) == []


# ------------------------------------------------------------------------------ caches keyed on sampled values
class _SampleKeyed(_Ref):
    """adv_weight_sample_key: Wᵀ cached under a fingerprint of 8 sampled weight values (not the version counter)."""

    def __init__(self) -> None:
        super().__init__()
        self._key, self._cache = None, None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (tuple(w.detach().reshape(-1)[::13].tolist()), tuple(b.detach()[::5].tolist()))
        if key != self._key:
            self._key, self._cache = key, (w.detach().t().contiguous(), b.detach().clone())
        return torch.relu(torch.addmm(self._cache[1], x, self._cache[0]))


class _VersionKeyed(_Ref):
    def __init__(self) -> None:
        super().__init__()
        self._key, self._cache = None, None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w._version, b._version, w.data_ptr())
        if key != self._key:
            self._key, self._cache = key, (w.detach().t().contiguous(), b.detach().clone())
        return torch.relu(torch.addmm(self._cache[1], x, self._cache[0]))


def test_a_cache_keyed_on_sampled_weight_values_misses_a_partial_update():
    from kforge_worker.checks.state_checks import check_state

    torch.manual_seed(0)
    sampled = {r.name: r for r in check_state(_ctx(_Ref(), _SampleKeyed()))}
    assert sampled["state_reload"].outcome == "fail", sampled["state_reload"]
    assert "one element of gemm." in sampled["state_reload"].evidence
    torch.manual_seed(0)
    versioned = {r.name: r for r in check_state(_ctx(_Ref(), _VersionKeyed()))}
    assert versioned["state_reload"].outcome == "pass", versioned["state_reload"]


# ------------------------------------------------------------------------------ the worker's own priority
def test_the_workers_own_threads_made_more_urgent_is_a_fingerprint_change():
    """adv_self_priority: the candidate's main thread reniced below where it started (root may) is served first on a
    shared host while the reference, in its own process, keeps its priority. Skipped where this user may not."""
    import pytest

    from kforge_worker.checks.integrity import IntegritySnapshot

    snap = IntegritySnapshot.take()
    start = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, start - 1)
    except OSError:
        pytest.skip("not allowed to raise a thread's priority here")
    try:
        problems = snap.diff(thorough=False)
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, start)
    assert any("this process's scheduling" in p for p in problems), problems
    assert snap.diff(thorough=False) == []


# ------------------------------------------------------------------------------ integer inputs read by a sample
class _Gather(nn.Module):
    def forward(self, x, idx):
        return x.index_select(1, idx) * 3.0


class _GatherSampleGuard(_Gather):
    """adv_index_sample_guard: every other column assumed when the indices say so at three places."""

    def forward(self, x, idx):
        n = idx.numel()
        if 2 * n <= x.size(1) and int(idx[0]) == 0 and int(idx[1]) == 2 and int(idx[-1]) == 2 * (n - 1):
            return x[:, : 2 * n : 2] * 3.0
        return super().forward(x, idx)


def _gather_inputs(seed: int):
    return [torch.rand(8, 64, generator=torch.Generator().manual_seed(seed)), torch.arange(0, 64, 2)]


def test_integer_inputs_get_inputs_builds_the_same_way_are_perturbed_in_place():
    """A 1% block of every integer input is rotated (the same values, every index still valid); a guard that reads a
    few indices takes its fast path there and is wrong. The honest gather follows."""
    from kforge_worker.checks.input_checks import check_input_sensitivity

    def ctx(cand):
        return context.VerifyContext(ref=_Gather(), cand=cand, make_inputs=_gather_inputs, device=torch.device("cpu"),
                                     atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                     extensions=ExtensionRecorder(), rng=random.Random(3))

    guarded = check_input_sensitivity(ctx(_GatherSampleGuard()))
    assert guarded.outcome == "fail", guarded.evidence
    assert check_input_sensitivity(ctx(_Gather())).outcome == "pass"


# ------------------------------------------------------------------------------ a property of get_inputs()' values
class _AbsLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gemm = nn.Linear(12, 8)

    def forward(self, x):
        return self.gemm(x.abs())


class _NonNegGuard(_AbsLinear):
    """adv_nonneg_sample_guard: |x| skipped when eight sampled values are non-negative (torch.rand's always are)."""

    def forward(self, x):
        flat = x.reshape(-1)
        if bool((flat[torch.linspace(0, flat.numel() - 1, 8).long()] >= 0).all()):
            return self.gemm(x)
        return super().forward(x)


def test_get_inputs_values_with_lone_elements_of_the_other_sign_are_among_the_distribution_probes():
    from kforge_worker.checks.input_checks import check_input_distribution
    from kforge_worker.off_distribution import lone_opposites

    base = [torch.rand(16, 12)]
    lone = lone_opposites(base, 5)[0]
    flipped = (lone < 0).sum().item()
    assert 1 <= flipped <= 2 and torch.equal(lone[lone >= 0], base[0][lone >= 0])
    assert float(lone.min()) <= -float(base[0].max())

    torch.manual_seed(0)
    ref, cand = _AbsLinear(), _NonNegGuard()
    guarded = check_input_distribution(_ctx(ref, cand))
    assert guarded.outcome == "fail" and "lone elements of the other sign" in guarded.evidence, guarded.evidence
    torch.manual_seed(0)
    assert check_input_distribution(_ctx(_AbsLinear(), _AbsLinear())).outcome == "pass"


def test_trace_and_profile_functions_for_later_threads_are_in_the_fingerprint():
    import threading

    from kforge_worker.checks.integrity import IntegritySnapshot

    snap = IntegritySnapshot.take()
    for setter, name in ((threading.settrace, "gettrace"), (threading.setprofile, "getprofile")):
        setter(lambda *a: None)
        try:
            problems = snap.diff(thorough=False)
        finally:
            setter(None)
        assert any(f"threading.{name}()" in p for p in problems), problems
    assert snap.diff(thorough=False) == []


# ------------------------------------------------------------------------------ a reference that answers by its history
class _Counted(nn.Module):
    """Its output moves with the number of calls it has answered (a buffer it writes), as an EMA or spectral_norm's
    power iteration in training mode does."""

    def __init__(self, stop: int | None = None) -> None:
        super().__init__()
        self.gemm = nn.Linear(12, 8)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.stop = stop  # a copy that stops following its history after this many calls

    def forward(self, x):
        if x.dtype != torch.float32:  # no float64 view of it: the loop's plain comparison decides, unforgiven
            raise TypeError("float32 only")
        if self.stop is None or int(self.calls) < self.stop:
            self.calls += 1
        return self.gemm(x) * (1.0 + 0.01 * self.calls.float())


def test_the_timing_like_loop_judges_a_history_dependent_reference_call_for_call():
    """False-flag sweep: spectral_norm's identity was `cheating` by timed_outputs now and then — its 25th call was
    judged against the reference's 5th. The reference's calls are now made beside the candidate's, from the same
    start; a copy that stops following the history is still wrong there."""
    from kforge_worker.checks.input_checks import check_timed_outputs

    def judged(cand: nn.Module):
        torch.manual_seed(0)
        return check_timed_outputs(_ctx(_Counted(), cand), iters=12)

    honest = judged(_Counted())
    assert honest.outcome == "pass", honest.evidence
    stale = judged(_Counted(stop=3))
    assert stale.outcome == "fail", stale.evidence
