"""Red team round 2 (issue 15, 2026-11-25): holes found on the CPU and the general defences that close them —
sizes well above the benchmark's, rows that lean on the rest of the batch, outputs never materialised."""

from __future__ import annotations

import random

import torch
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.input_checks import _rows_apart, _well_above, check_extra_shapes, check_input_distribution
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.output_checks import check_output_contract
from kforge_worker.checks.static_scan import ScanReport
from kforge_worker.timed_inputs import OutputSampler, OutputSharing


def _context(ref: nn.Module, cand: nn.Module, make_inputs) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=1e-4, rtol=1e-4, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(5))


def _rows(seed: int):
    return [torch.randn(48, 8, generator=torch.Generator().manual_seed(seed))]


class _Relu(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class _RowsUpTo96(nn.Module):
    """A fixed grid: right for up to 96 rows (twice the benchmark's 48), zeros beyond — the ~1.5× step passes."""

    def forward(self, x):
        out = torch.zeros_like(x)
        out[:96] = torch.relu(x[:96])
        return out


# ------------------------------------------------------------------------------------- well above the sizes
def test_well_above_steps_are_odd_and_over_twice_the_size():
    for s in (3, 8, 48, 64, 4096):
        steps = _well_above(s)
        assert steps and all(n > 2 * s and n % 2 == 1 for n in steps) and steps == sorted(steps, reverse=True)


def test_a_candidate_right_up_to_twice_the_benchmark_size_fails_well_above():
    result = check_extra_shapes(_context(_Relu(), _RowsUpTo96(), _rows))
    assert result.outcome == "fail" and result.fail_verdict == "incorrect", result.evidence
    assert "48->193" in result.evidence


def test_sizes_well_above_stay_within_the_time_bound_and_say_so():
    honest = check_extra_shapes(_context(_Relu(), _Relu(), _rows))
    assert honest.outcome == "pass" and "48->73: ok" in honest.evidence and "48->193: ok" in honest.evidence
    bounded = check_extra_shapes(_context(_Relu(), _RowsUpTo96(), _rows), well_above_seconds=0.0)
    assert bounded.outcome == "pass" and "well above, not tried" in bounded.evidence


def test_sizes_well_above_stay_within_the_memory_budget(monkeypatch):
    monkeypatch.setenv("KFORGE_CHECK_MEMORY", str(48 * 8 * 4 * 7))  # room for the 1.5× step's copies only
    result = check_extra_shapes(_context(_Relu(), _RowsUpTo96(), _rows))
    assert result.outcome == "pass" and "over the check budget" in result.evidence


# ------------------------------------------------------------------------------------- rows apart
class _Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class _SoftmaxBatchMax(nn.Module):
    """Shifted by the whole batch's max, not each row's: exact while the rows have alike ranges."""

    def forward(self, x):
        e = torch.exp(x - x.max())
        return e / e.sum(dim=1, keepdim=True)


def _uniform_rows(seed: int):
    return [torch.rand(16, 512, generator=torch.Generator().manual_seed(seed))]


def test_rows_apart_span_every_scale_with_zero_rows():
    for rows in (2, 3, 16):
        (x,) = _rows_apart([torch.rand(rows, 64)], seed=rows, device=torch.device("cpu"))
        peak = x.abs().amax(dim=1)
        assert peak.max() > 10 and peak[peak > 0].min() < 0.1
        assert int((peak == 0).sum()) == (0 if rows == 2 else max(1, rows // 8))
    assert _rows_apart([torch.rand(64)], seed=0, device=torch.device("cpu")) is None


def test_a_row_that_leans_on_the_batch_is_incorrect_and_a_row_wise_candidate_passes():
    ctx = _context(_Softmax(), _SoftmaxBatchMax(), _uniform_rows)
    result = check_input_distribution(ctx)
    assert result.outcome == "fail" and result.fail_verdict == "incorrect", result.evidence
    assert "rows at scales" in result.evidence
    honest = check_input_distribution(_context(_Softmax(), _Softmax(), _uniform_rows))
    assert honest.outcome == "pass" and "rows at scales" in honest.evidence, honest.evidence


class _Bce(nn.Module):
    def forward(self, p, t):
        return nn.functional.binary_cross_entropy(p, t)


class _BceSeen(_Bce):
    """Remembers the range of every probability it was given."""

    def __init__(self):
        super().__init__()
        self.ranges = []

    def forward(self, p, t):
        self.ranges.append((float(p.min()), float(p.max())))
        return super().forward(p, t)


def _probabilities(seed: int):
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(16, 64, generator=gen) * 0.9 + 0.05, torch.randint(0, 2, (16, 64), generator=gen).float()]


def test_a_reference_that_asserts_on_values_gets_variants_within_its_inputs_range():
    """binary_cross_entropy on a GPU is a device-side assert for a probability outside [0, 1]: the standard-normal
    variants ended the worker's CUDA context (a problem with F.binary_cross_entropy was `runtime_error`, kforge's
    internal error). On a CPU the reference raised and every variant was skipped. The variants now stay within
    get_inputs()' own range for such references, and are compared."""
    cand = _BceSeen()
    result = check_input_distribution(_context(_Bce(), cand, _probabilities))
    assert result.outcome == "pass", result.evidence
    assert "binary_cross_entropy" in result.evidence and "reference raised" not in result.evidence
    assert "randn×4: " in result.evidence and "rows at scales" in result.evidence
    assert len(cand.ranges) == 10 and all(0.05 <= lo and hi <= 0.95 for lo, hi in cand.ranges), cand.ranges
    assert min(lo for lo, _ in cand.ranges) < 0.06 and max(hi for _, hi in cand.ranges) > 0.94


# ------------------------------------------------------------------------------------- outputs never materialised
class _RowSumRepeated(nn.Module):
    def forward(self, x):
        return x.sum(dim=1, keepdim=True).repeat(1, x.shape[1])


class _RowSumExpanded(nn.Module):
    def forward(self, x):
        return x.sum(dim=1, keepdim=True).expand(-1, x.shape[1])


class _ReluTransposed(nn.Module):
    def forward(self, x):
        return torch.relu(x.t().contiguous()).t()


def _by_name(results, name):
    return next(r for r in results if r.name == name)


def test_an_expanded_output_where_the_reference_materialises_is_a_failed_output_type():
    ctx = _context(_RowSumRepeated(), _RowSumExpanded(), _uniform_rows)
    kind = _by_name(check_output_contract(ctx), "output_type")
    assert kind.outcome == "fail" and "sharing memory" in kind.evidence
    # ... unless the reference's own output is expanded too
    same = _by_name(check_output_contract(_context(_RowSumExpanded(), _RowSumExpanded(), _uniform_rows)),
                    "output_type")
    assert same.outcome == "pass", same.evidence


def test_another_memory_layout_is_said_not_failed():
    kind = _by_name(check_output_contract(_context(_Relu(), _ReluTransposed(), _uniform_rows)), "output_type")
    assert kind.outcome == "warn" and "contiguous=False" in kind.evidence


def test_an_expanded_timed_output_fails_every_pair():
    sampler = OutputSampler(lambda c, r: (True, None), rng=random.Random(1))
    x = torch.rand(8, 32)
    for pair in range(3):
        sampler.after_pair(pair, _RowSumRepeated()(x), _RowSumExpanded()(x), [x.clone()])
    assert len(sampler.wrong) == 3 and "sharing memory" in (sampler.wrong[0].message or "")
    assert sampler.check(0)["outcome"] == "fail"
    honest = OutputSampler(lambda c, r: (True, None), rng=random.Random(1))
    for pair in range(3):
        honest.after_pair(pair, _RowSumExpanded()(x), _RowSumExpanded()(x), None)
    assert not honest.wrong


def test_an_expanded_timed_output_fails_when_the_reference_is_fetched_lazily():
    """With the reference in its own process the pair's reference output is a fetcher (fetched only when
    sampled): the layout the pipeline asked the reference for once before timing decides."""
    x = torch.rand(8, 32)
    sampler = OutputSampler(lambda c, r: (True, None), c=0.0, floor=0.0, rng=random.Random(1))
    sampler.reference_overlaps = OutputSharing((False,), frozenset())
    sampler.after_pair(0, lambda: _RowSumRepeated()(x), _RowSumExpanded()(x), [x.clone()])
    assert len(sampler.wrong) == 1
    unknown = OutputSampler(lambda c, r: (True, None), c=0.0, floor=0.0, rng=random.Random(1))
    unknown.after_pair(0, lambda: _RowSumRepeated()(x), _RowSumExpanded()(x), [x.clone()])
    assert not unknown.wrong


def test_an_expanded_output_in_the_timing_like_loop_fails_timed_outputs():
    from kforge_worker.checks.input_checks import check_timed_outputs

    ctx = _context(_RowSumRepeated(), _RowSumExpanded(), _uniform_rows)
    result = check_timed_outputs(ctx, pool_size=2, iters=4)
    assert result.outcome == "fail" and "sharing memory" in result.evidence
    honest = check_timed_outputs(_context(_RowSumRepeated(), _RowSumRepeated(), _uniform_rows), pool_size=2, iters=4)
    assert honest.outcome == "pass", honest.evidence


class _Normalize(nn.Module):
    def forward(self, x):
        return nn.functional.normalize(x, dim=1)


class _NormalizeNoFloor(nn.Module):
    def forward(self, x):
        return x * torch.rsqrt((x * x).sum(dim=1, keepdim=True))


class _SoftmaxUnshifted(nn.Module):
    def forward(self, x):
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)


def test_zero_rows_and_large_magnitudes_are_inputs_too():
    """Right on every randn draw, wrong on structure get_inputs() could produce: a zero row (no eps under the
    norm) and rows at 1e2 (exp without the max shift overflows)."""
    for ref, cand in ((_Normalize(), _NormalizeNoFloor()), (_Softmax(), _SoftmaxUnshifted())):
        result = check_input_distribution(_context(ref, cand, _uniform_rows))
        # the unshifted softmax overflows on a lone spike at 1e2 too (round 9's variant, drawn before the rows')
        assert result.outcome == "fail" and ("rows at scales" in result.evidence or "lone spikes" in result.evidence), \
            result.evidence


class _TwoCopies(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return y, y.clone()


class _OneResultTwice(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return y, y


def test_one_result_handed_out_twice_where_the_reference_returns_two_tensors_fails():
    kind = _by_name(check_output_contract(_context(_TwoCopies(), _OneResultTwice(), _uniform_rows)), "output_type")
    assert kind.outcome == "fail" and "outputs 0 and 1 share storage" in kind.evidence
    same = _by_name(check_output_contract(_context(_OneResultTwice(), _OneResultTwice(), _uniform_rows)),
                    "output_type")
    assert same.outcome == "pass", same.evidence
    sampler = OutputSampler(lambda c, r: (True, None), c=0.0, floor=0.0, rng=random.Random(1))
    x = torch.rand(4, 8)
    sampler.after_pair(0, _TwoCopies()(x), _OneResultTwice()(x), None)
    assert len(sampler.wrong) == 1


def test_a_reference_that_returns_an_expanded_view_lets_the_timing_like_loop_pass_one():
    from kforge_worker.checks.input_checks import check_timed_outputs

    result = check_timed_outputs(_context(_RowSumExpanded(), _RowSumExpanded(), _uniform_rows), pool_size=2, iters=4)
    assert result.outcome == "pass", result.evidence


class _TwoSlicesOfOneBuffer(nn.Module):
    """A fused kernel's way: both results in one allocation, returned as two disjoint (or interleaved) views."""

    def __init__(self, interleaved: bool = False):
        super().__init__()
        self.interleaved = interleaved

    def forward(self, x):
        if self.interleaved:
            buf = torch.empty(*x.shape, 2)
            buf[..., 0], buf[..., 1] = torch.relu(x), torch.relu(x)
            return buf[..., 0], buf[..., 1]
        buf = torch.empty(2, *x.shape)
        buf[0], buf[1] = torch.relu(x), torch.relu(x)
        return buf[0], buf[1]


def test_two_outputs_in_disjoint_parts_of_one_buffer_are_not_shared():
    for cand in (_TwoSlicesOfOneBuffer(), _TwoSlicesOfOneBuffer(interleaved=True)):
        kind = _by_name(check_output_contract(_context(_TwoCopies(), cand, _uniform_rows)), "output_type")
        assert kind.outcome in ("pass", "warn") and "share storage" not in kind.evidence, kind.evidence
