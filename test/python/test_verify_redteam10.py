"""Red team round 10 (2026-11-29, sixth session): what an answer does to the objects it is given and hands back,
beyond the values of one call — its own parameters, other instances of itself, the caller's inputs on the timing's
path, results the caller keeps, inputs in the layouts callers pass. See bench/verify/NOTES.md, "red team round 10".
"""

from __future__ import annotations

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


def _ctx(ref: nn.Module, cand: nn.Module, rebuild=None, rows: int = 6) -> context.VerifyContext:
    cand.load_state_dict(ref.state_dict())
    return context.VerifyContext(ref=ref, cand=cand,
                                 make_inputs=lambda s: [torch.rand(rows, 12, generator=torch.Generator().manual_seed(s))],
                                 device=torch.device("cpu"), atol=1e-4, rtol=1e-4,
                                 scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(7), rebuild=rebuild)


# ------------------------------------------------------------------ parameters rewritten by forward
class _Relayout(_Ref):
    """adv_param_relayout: the weight rewritten in place as Wᵀ (same shape), relaid whenever it is written from outside
    with values that are none of the relaid copies it made."""

    def __init__(self) -> None:
        super().__init__()
        self._v = None
        self._relaid: list[torch.Tensor] = []

    def forward(self, x):
        w = self.gemm.weight
        o, i = w.shape
        if self._v != w._version:
            if not any(torch.equal(w.detach(), r) for r in self._relaid):
                with torch.no_grad():
                    w.copy_(w.detach().t().contiguous().view(o, i))
                self._relaid = (self._relaid + [w.detach().clone()])[-8:]
            self._v = w._version
        return torch.relu(torch.addmm(self.gemm.bias, x, w.view(i, o)))


class _TransposedBuffer(_Ref):
    """Honest: the transposed weight kept beside it (a non-persistent buffer), the weight left as it is."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w_t", torch.empty(12, 8), persistent=False)
        self._v = None

    def forward(self, x):
        w = self.gemm.weight
        if self._v != (w._version, w.data_ptr()):
            with torch.no_grad():
                self.w_t.copy_(w.t())
            self._v = (w._version, w.data_ptr())
        return torch.relu(torch.addmm(self.gemm.bias, x, self.w_t))


def test_a_forward_that_rewrites_its_own_parameters_fails_state_reload():
    """Right outputs after every load_state_dict and in-place write (it relays the weight again each time), but its
    state_dict after a call holds Wᵀ: the parameters must still hold what was loaded where the reference's do."""
    from kforge_worker.checks.state_checks import check_state

    torch.manual_seed(0)
    relaid = {r.name: r for r in check_state(_ctx(_Ref(), _Relayout()))}
    assert relaid["state_reload"].outcome == "fail", relaid["state_reload"]
    assert "rewrote its own parameters" in relaid["state_reload"].evidence and "gemm.weight" in relaid["state_reload"].evidence
    torch.manual_seed(0)
    honest = {r.name: r for r in check_state(_ctx(_Ref(), _TransposedBuffer()))}
    assert honest["state_reload"].outcome == "pass", honest["state_reload"]


# ------------------------------------------------------------------ state shared between instances
_SHARED: dict = {}


class _ModuleLevelCache(_Ref):
    """adv_shared_weight_cache: Wᵀ cached at module level, keyed on shape, dtype and the version counters."""

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (tuple(w.shape), w.dtype, w._version, b._version)
        if key not in _SHARED:
            _SHARED.clear()
            _SHARED[key] = (w.detach().t().contiguous(), b.detach().clone())
        wt, bias = _SHARED[key]
        return torch.relu(torch.addmm(bias, x, wt))


class _InstanceCache(_Ref):
    def __init__(self) -> None:
        super().__init__()
        self._wt = None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w._version, b._version, w.data_ptr())
        if self._wt is None or self._wt[0] != key:
            self._wt = (key, w.detach().t().contiguous(), b.detach().clone())
        return torch.relu(torch.addmm(self._wt[2], x, self._wt[1]))


def _rebuild(cls):
    def build(seed: int):
        torch.manual_seed(seed)
        ref = _Ref()
        torch.manual_seed(seed)
        new = cls()
        new.load_state_dict(ref.state_dict())
        return ref, new
    return build


def test_instances_sharing_a_module_level_cache_fail_state_instances():
    """Every check before used the one instance the pipeline built; two more built the same way from other seeds
    start at the same version counters, and the second is answered with the first one's weights."""
    from kforge_worker.checks.state_checks import check_instances

    _SHARED.clear()
    torch.manual_seed(1)
    shared = check_instances(_ctx(_Ref(), _ModuleLevelCache(), rebuild=_rebuild(_ModuleLevelCache)))
    assert shared.outcome == "fail" and shared.fail_verdict == "incorrect", shared
    assert "instance" in shared.evidence
    torch.manual_seed(1)
    own = check_instances(_ctx(_Ref(), _InstanceCache(), rebuild=_rebuild(_InstanceCache)))
    assert own.outcome == "pass", own
    assert check_instances(_ctx(_Ref(), _InstanceCache())).outcome == "skip"


# ------------------------------------------------------------------ inputs written on the timing's path
class _Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class _ScratchWhenRewritten(nn.Module):
    """adv_input_scratch_versioned: the input used as scratch once it was written in place before."""

    def forward(self, x):
        if x._version > 0:
            with torch.no_grad():
                x.sub_(x.amax(dim=1, keepdim=True)).exp_()
                return x / x.sum(dim=1, keepdim=True)
        return torch.softmax(x, dim=1)


class _KeptScratch(nn.Module):
    """Honest: a kept intermediate buffer, the input only read, a fresh output each call."""

    def __init__(self) -> None:
        super().__init__()
        self.buf = None

    def forward(self, x):
        if self.buf is None or self.buf.shape != x.shape:
            self.buf = torch.empty_like(x)
        torch.sub(x, x.amax(dim=1, keepdim=True), out=self.buf)
        self.buf.exp_()
        return self.buf / self.buf.sum(dim=1, keepdim=True)


def _softmax_ctx(cand: nn.Module) -> context.VerifyContext:
    return context.VerifyContext(ref=_Softmax(), cand=cand,
                                 make_inputs=lambda s: [torch.rand(4, 32, generator=torch.Generator().manual_seed(s))],
                                 device=torch.device("cpu"), atol=1e-5, rtol=1e-5,
                                 scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(5))


def test_the_timing_like_loop_fails_a_call_that_writes_its_inputs():
    """input_mutation hands fresh tensors; the timing-like loop writes its sets in place, as the timing and every
    pipeline that fills a tensor with copy_ do: a call that leaves its input changed there is caught, right outputs
    or not."""
    from kforge_worker.checks.input_checks import check_timed_outputs

    scratch = check_timed_outputs(_softmax_ctx(_ScratchWhenRewritten()), iters=8)
    assert scratch.outcome == "fail" and "wrote its input" in scratch.evidence, scratch
    assert check_timed_outputs(_softmax_ctx(_KeptScratch()), iters=8).outcome == "pass"


class _Ring(nn.Module):
    """adv_output_ring6: six kept output buffers handed out in turn."""

    def __init__(self, n: int = 6) -> None:
        super().__init__()
        self.n, self.k, self.bufs = n, 0, None

    def forward(self, x):
        if self.bufs is None or self.bufs[0].shape != x.shape:
            self.bufs = [torch.empty_like(x) for _ in range(self.n)]
        out = self.bufs[self.k]
        self.k = (self.k + 1) % self.n
        return out.copy_(torch.softmax(x, dim=1))


def test_a_ring_of_more_kept_outputs_than_output_aliasing_holds_fails_the_timing_like_loop():
    """output_aliasing holds four later calls; the loop holds its outputs as the budget allows (all 32 here)."""
    from kforge_worker.checks.input_checks import check_timed_outputs
    from kforge_worker.checks.output_checks import RING_CALLS

    ring = check_timed_outputs(_softmax_ctx(_Ring(RING_CALLS + 2)), iters=16)
    assert ring.outcome == "fail" and "kept buffer handed out again" in ring.evidence, ring


def test_a_timed_pair_whose_inputs_were_written_is_a_wrong_sample():
    """The timing's sampled pairs compare the candidate's set with the values it was given (the pool's own copy
    here; the staged values with the reference in its own process)."""
    from kforge_worker.timed_inputs import FreshInputPool, OutputSampler, written_inputs

    pool = FreshInputPool(lambda s: [torch.rand(4, 8, generator=torch.Generator().manual_seed(s))],
                          lambda: random.randrange(1, 2**31), sets=2)
    pool.advance()
    assert pool.inputs_written() is None
    sampler = OutputSampler(lambda c, r: (True, None), c=100.0)
    out = torch.softmax(pool.cand_inputs()[0], dim=1)
    pool.cand_inputs()[0].mul_(0)  # scratch
    sampler.after_pair(0, out, out.clone(), None, False, pool.inputs_written)
    assert sampler.wrong and "wrote its input" in sampler.wrong[0].message
    assert written_inputs([torch.tensor([float("nan"), 1.0])], [torch.tensor([float("nan"), 1.0])]) is None


# ------------------------------------------------------------------ inputs in other memory layouts
class _PointerRead(_Ref):
    """adv_contiguous_assumed: the input read as if contiguous."""

    def forward(self, x):
        flat = torch.as_strided(x, x.shape, (x.shape[1], 1), x.storage_offset())
        return torch.relu(torch.addmm(self.gemm.bias, flat, self.gemm.weight.t()))


class _ContiguousFirst(_PointerRead):
    def forward(self, x):
        return super().forward(x.contiguous())


class _Refuses(_PointerRead):
    def forward(self, x):
        if not x.is_contiguous():
            raise RuntimeError("contiguous input expected")
        return super().forward(x)


def test_inputs_in_other_layouts_are_followed_refused_or_wrong():
    from kforge_worker.checks.input_checks import check_input_layouts

    torch.manual_seed(2)
    wrong = check_input_layouts(_ctx(_Ref(), _PointerRead()))
    assert wrong.outcome == "fail" and wrong.fail_verdict == "incorrect", wrong
    torch.manual_seed(2)
    assert check_input_layouts(_ctx(_Ref(), _ContiguousFirst())).outcome == "pass"
    torch.manual_seed(2)
    assert check_input_layouts(_ctx(_Ref(), _Refuses())).outcome == "warn"


# ------------------------------------------------------------------ memory that is not what torch ops read
class _NegView(_Ref):
    """adv_neg_bit_output: -relu(...) in memory, handed back under a negative bit."""

    def forward(self, x):
        return torch._neg_view(torch.relu(self.gemm(x)).neg())


class _Above(nn.Module):
    def forward(self, x):
        return x > x.mean(dim=1, keepdim=True)


class _AboveBytes(nn.Module):
    """adv_bool_bytes: a 0/255 byte mask viewed as bool."""

    def forward(self, x):
        return (x > x.mean(dim=1, keepdim=True)).to(torch.uint8).mul_(255).view(torch.bool)


def test_outputs_whose_memory_holds_other_values_than_torch_reads_fail_output_type():
    """Both compare equal through every torch op; a kernel reading data_ptr(), numpy or a byte serialiser reads the
    memory. The timed path's type-only contract sees the negative bit too (metadata, nothing read)."""
    from kforge_worker.checks.output_checks import check_output_contract
    from kforge_worker.timed_inputs import foreign_outputs

    torch.manual_seed(3)
    neg = {r.name: r for r in check_output_contract(_ctx(_Ref(), _NegView()))}
    assert neg["output_type"].outcome == "fail" and "neg bit" in neg["output_type"].evidence, neg["output_type"]
    assert "negative-bit" in foreign_outputs(torch._neg_view(torch.ones(2)))
    torch.manual_seed(3)
    plain = {r.name: r for r in check_output_contract(_ctx(_Ref(), _Ref()))}
    assert plain["output_type"].outcome == "pass"
    mask = context.VerifyContext(ref=_Above(), cand=_AboveBytes(),
                                 make_inputs=lambda s: [torch.randn(6, 10, generator=torch.Generator().manual_seed(s))],
                                 device=torch.device("cpu"), atol=1e-4, rtol=1e-4,
                                 scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(2))
    byte = {r.name: r for r in check_output_contract(mask)}
    assert byte["output_type"].outcome == "fail" and "bytes other than 0/1" in byte["output_type"].evidence
    mask.cand = _Above()
    assert {r.name: r for r in check_output_contract(mask)}["output_type"].outcome == "pass"
