"""Red team round 12 (2026-11-30, CPU, by a helper): what the caller holds fixed and no check varied — whether the
weights are parameters at all, values past float16's range, a batch of one, channels-last inputs, the caller's thread
and thread count, and references that are NaN by definition (whose every distribution probe was skipped). See
bench/verify/NOTES.md, "red team round 12".
"""

from __future__ import annotations

import random
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F

from kforge_worker.checks import context
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport


class _Ref(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gemm = nn.Linear(12, 8)

    def forward(self, x):
        return torch.relu(self.gemm(x))


def _ctx(ref: nn.Module, cand: nn.Module, make=None, load: bool = True) -> context.VerifyContext:
    if load:
        cand.load_state_dict(ref.state_dict())
    make = make or (lambda s: [torch.rand(6, 12, generator=torch.Generator().manual_seed(s))])
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make, device=torch.device("cpu"), atol=1e-4,
                                 rtol=1e-4, scan=ScanReport("c.py", frozenset()), extensions=ExtensionRecorder(),
                                 rng=random.Random(12))


# ------------------------------------------------------------------------------ weights that are not parameters
class _Holder(nn.Module):
    def __init__(self, persistent: bool = True) -> None:
        super().__init__()
        lin = nn.Linear(12, 8)
        self.register_buffer("weight", lin.weight.detach().clone(), persistent=persistent)
        self.register_buffer("bias", lin.bias.detach().clone(), persistent=persistent)


class _AsBuffers(nn.Module):
    """adv_params_as_buffers: the reference's names, as buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.gemm = _Holder()

    def forward(self, x):
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))


class _RenamedBuffers(nn.Module):
    """The same under names of its own (state_dict keys differ: synced by seed only)."""

    def __init__(self) -> None:
        super().__init__()
        lin = nn.Linear(12, 8)
        self.register_buffer("w", lin.weight.detach().clone())
        self.register_buffer("b", lin.bias.detach().clone())

    def forward(self, x):
        return torch.relu(F.linear(x, self.w, self.b))


class _RenamedParams(nn.Module):
    """Honest: the weights as parameters under names of its own, and a non-persistent transposed copy."""

    def __init__(self) -> None:
        super().__init__()
        lin = nn.Linear(12, 8)
        self.w, self.b = lin.weight, lin.bias
        self.register_buffer("wt", self.w.detach().t().contiguous(), persistent=False)

    def forward(self, x):
        return torch.relu(torch.addmm(self.b, x, self.w.t()))


class _Frozen(_Ref):
    def __init__(self) -> None:
        super().__init__()
        self.requires_grad_(False)


def test_weights_kept_as_buffers_fail_state_parameters():
    """Loaded, called and checkpointed, a buffer is a parameter's double; only model.parameters() tells them apart (an
    optimizer built from it trains nothing). Under the reference's names or under names of its own: failed. Renamed
    parameters pass (parameters are counted, not named); frozen ones are said."""
    from kforge_worker.checks.state_checks import check_parameters

    torch.manual_seed(0)
    r = check_parameters(_ctx(_Ref(), _AsBuffers()))
    assert r.outcome == "fail" and r.fail_verdict == "incorrect" and "gemm.weight, gemm.bias are buffers" in r.evidence
    r = check_parameters(_ctx(_Ref(), _RenamedBuffers(), load=False))
    assert r.outcome == "fail" and "hold 0 element(s)" in r.evidence, r
    assert check_parameters(_ctx(_Ref(), _RenamedParams(), load=False)).outcome == "pass"
    assert check_parameters(_ctx(_Ref(), _Ref())).outcome == "pass"
    assert check_parameters(_ctx(_Ref(), _Frozen())).outcome == "warn"
    assert check_parameters(_ctx(nn.ReLU(), nn.ReLU())).outcome == "skip"


# ------------------------------------------------------------------------------ values past float16's range
class _Clamped1e5(_Ref):
    def forward(self, x):
        return super().forward(x.clamp(-1e5, 1e5))


def test_values_past_float16s_range_are_among_the_distribution_probes():
    """randn×1e4 reaches ~4e4, under float16's 65504: a clamp (or a saturating half intermediate) at 1e5 passed it.
    randn×1e6 takes it apart; the reference's own layer passes, and the rows variant stays the timing's kind."""
    from kforge_worker.checks.input_checks import check_input_distribution

    torch.manual_seed(1)
    r = check_input_distribution(_ctx(_Ref(), _Clamped1e5()))
    assert r.outcome == "fail" and "randn×1e+06" in r.evidence, r
    ctx = _ctx(_Ref(), _Ref())
    assert check_input_distribution(ctx).outcome == "pass"
    assert ctx.notes["timed_variant_spec"]["kind"] == "rows"


# ------------------------------------------------------------------------------ references NaN by definition
class _Log(nn.Module):
    def forward(self, x):
        return torch.log(x) * 2.0


class _LogClamped(nn.Module):
    def forward(self, x):
        return torch.log(x.clamp(max=100.0)) * 2.0


class _LogNanFree(nn.Module):
    """NaN replaced by a finite value where the reference has it: wrong wherever the reference is undefined."""

    def forward(self, x):
        return torch.nan_to_num(torch.log(x) * 2.0, nan=0.0)


def _signed(s: int) -> list[torch.Tensor]:
    return [torch.randn(16, 32, generator=torch.Generator().manual_seed(s))]


def test_a_reference_nan_by_definition_still_has_its_variants_judged():
    """log of signed inputs is NaN on every negative value: every variant's reference was 'not finite, skipped', so a
    clamp at 100 passed every probe. Such a reference's variants are now judged with their non-finite values, which
    must match; the reference's own op passes."""
    from kforge_worker.checks.input_checks import check_input_distribution

    torch.manual_seed(2)
    r = check_input_distribution(_ctx(_Log(), _LogClamped(), _signed, load=False))
    assert r.outcome == "fail" and r.fail_verdict == "incorrect", r
    r = check_input_distribution(_ctx(_Log(), _LogNanFree(), _signed, load=False))
    assert r.outcome == "fail", r
    r = check_input_distribution(_ctx(_Log(), _Log(), _signed, load=False))
    assert r.outcome == "pass" and "judged with their non-finite values" in r.evidence, r


# ------------------------------------------------------------------------------ a batch of one
class _GemvNoBias(_Ref):
    def forward(self, x):
        if x.shape[0] == 1:
            return torch.relu(torch.mv(self.gemm.weight, x[0])).unsqueeze(0)
        return super().forward(x)


class _GemvWithBias(_Ref):
    def forward(self, x):
        if x.shape[0] == 1:
            return torch.relu(torch.addmv(self.gemm.bias, self.gemm.weight, x[0])).unsqueeze(0)
        return super().forward(x)


def test_a_batch_of_one_is_among_the_extra_shapes():
    """The sizes below a batch of 6 stopped at 5 (odd, ~3/4): a single-row path that drops the bias was never met. A
    batch of one is tried now; the same path with its bias passes."""
    from kforge_worker.checks.input_checks import check_extra_shapes

    torch.manual_seed(3)
    r = check_extra_shapes(_ctx(_Ref(), _GemvNoBias()))
    assert r.outcome == "fail" and "->1 (a batch of one)" in r.evidence, r
    r = check_extra_shapes(_ctx(_Ref(), _GemvWithBias()))
    assert r.outcome == "pass" and "6->1 (a batch of one): ok" in r.evidence, r


# ------------------------------------------------------------------------------ channels-last inputs
class _Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class _DenseAsNchw(_Conv):
    """adv_channels_last_dense: any dense input read through its pointer as NCHW."""

    def forward(self, x):
        if x.is_contiguous() or x.is_contiguous(memory_format=torch.channels_last):
            n, c, h, w = x.shape
            x = x.as_strided((n, c, h, w), (c * h * w, h * w, w, 1), x.storage_offset())
        return super().forward(x.contiguous())


class _ChannelsLastInside(_Conv):
    def forward(self, x):
        return super().forward(x.contiguous(memory_format=torch.channels_last)).contiguous()


def _images(s: int) -> list[torch.Tensor]:
    return [torch.randn(2, 3, 5, 7, generator=torch.Generator().manual_seed(s))]


def test_channels_last_inputs_are_among_the_layouts():
    """A transposed and a padded input are not dense, so a kernel taking "dense" for "row-major" made them contiguous
    and passed; a channels-last input is dense and was read from the wrong elements. Following the layout passes."""
    from kforge_worker.checks.input_checks import check_input_layouts

    torch.manual_seed(4)
    r = check_input_layouts(_ctx(_Conv(), _DenseAsNchw(), _images))
    assert r.outcome == "fail" and "channels_last" in r.evidence, r
    r = check_input_layouts(_ctx(_Conv(), _ChannelsLastInside(), _images))
    assert r.outcome == "pass" and "channels_last:" in r.evidence, r


# ------------------------------------------------------------------------------ the caller's thread and thread count
class _MainThreadOnly(_Ref):
    def forward(self, x):
        if threading.current_thread() is threading.main_thread():
            return super().forward(x)
        return torch.relu(x @ self.gemm.weight.t())


class _ThreadCountKeyed(_Ref):
    def __init__(self) -> None:
        super().__init__()
        self.threads = torch.get_num_threads()

    def forward(self, x):
        if torch.get_num_threads() == self.threads:
            return super().forward(x)
        return torch.relu(x @ self.gemm.weight.t())


class _PerThreadScratch(_Ref):
    """Honest: a scratch buffer per thread (threading.local)."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def forward(self, x):
        out = getattr(self.local, "out", None)
        if out is None or out.shape != (x.shape[0], 8):
            out = self.local.out = torch.empty(x.shape[0], 8)
        return torch.relu(torch.addmm(self.gemm.bias, x, self.gemm.weight.t(), out=out)).clone()


class _MainThreadRefuses(_Ref):
    def forward(self, x):
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("single-threaded kernel")
        return super().forward(x)


def test_an_answer_that_depends_on_the_callers_thread_fails_caller_threads():
    """Every harness call comes from the main thread at one thread count. Called from another thread and at another
    thread count, a forward keyed on either is wrong (incorrect); a per-thread scratch passes; a raise is said. The
    thread count is put back."""
    from kforge_worker.checks.mode_checks import check_caller_threads

    torch.manual_seed(5)
    threads = torch.get_num_threads()
    r = check_caller_threads(_ctx(_Ref(), _MainThreadOnly()))
    assert r.outcome == "fail" and r.fail_verdict == "incorrect" and "another Python thread" in r.evidence, r
    r = check_caller_threads(_ctx(_Ref(), _ThreadCountKeyed()))
    assert r.outcome == "fail" and "torch.set_num_threads" in r.evidence, r
    assert torch.get_num_threads() == threads
    assert check_caller_threads(_ctx(_Ref(), _PerThreadScratch())).outcome == "pass"
    assert check_caller_threads(_ctx(_Ref(), _MainThreadRefuses())).outcome == "warn"
    assert torch.get_num_threads() == threads


# ------------------------------------------------------------------------------ whole-number inputs
class _Int8WhenWhole(_Ref):
    """adv_integer_inputs_int8: whole-number inputs saturated to int8's range."""

    def forward(self, x):
        if bool((x == x.round()).all()):
            x = x.clamp(-128.0, 127.0)
        return super().forward(x)


def test_whole_number_inputs_are_among_the_distribution_probes():
    """Pixel values and counts are whole numbers; every probe drew non-integral floats, so a path taken only for whole
    numbers was never met. The variant is untimed: the rows variant stays the timing's kind."""
    from kforge_worker import off_distribution
    from kforge_worker.checks.input_checks import check_input_distribution

    torch.manual_seed(6)
    r = check_input_distribution(_ctx(_Ref(), _Int8WhenWhole()))
    assert r.outcome == "fail" and "whole numbers" in r.evidence, r
    made = off_distribution.variant({"kind": "integers"}, [torch.rand(4, 5, dtype=torch.float16), 3], 1,
                                    torch.device("cpu"))
    assert made[1] == 3 and made[0].dtype == torch.float16 and torch.equal(made[0], made[0].round())
    assert float(made[0].abs().max()) <= 255
