"""The host-side helpers every emitted ModelNew carries (src/optimize/codegen/runtime.py.txt), on the CPU: the
ones only a CUDA run reaches otherwise (a CPU run takes the reference's forward before them)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
import torch.nn as nn

RUNTIME = Path(__file__).resolve().parents[2] / "src" / "optimize" / "codegen" / "runtime.py.txt"


@pytest.fixture(scope="module")
def runtime() -> dict:
    namespace = {"torch": torch, "nn": nn}
    exec(compile(RUNTIME.read_text(encoding="utf8"), str(RUNTIME), "exec"), namespace)  # noqa: S102
    return namespace


SHAPES = [(), (1,), (5,), (3, 1), (1, 4), (3, 4), (2, 3, 4), (2, 1, 4), (1, 3, 1), (6, 1, 1, 1)]


def test_broadcast_shapes_is_torchs(runtime):
    ours = runtime["_kf_broadcast_shapes"]
    for a, b in itertools.product(SHAPES, repeat=2):
        try:
            expected = list(torch.broadcast_shapes(a, b))
        except RuntimeError:
            with pytest.raises(RuntimeError, match="do not broadcast"):
                ours(torch.Size(a), torch.Size(b))
            continue
        assert ours(torch.Size(a), torch.Size(b)) == expected, (a, b)
        assert ours(list(a), torch.Size(b)) == expected, (a, b)  # a shape given as a list


def test_broadcast_of_tensors_is_torchs(runtime):
    tensors = [torch.empty(s) for s in [(2, 3, 4), (3, 1), (4,), ()]]
    for k in range(1, len(tensors) + 1):
        for group in itertools.permutations(tensors, k):
            assert runtime["_kf_broadcast"](group) == list(torch.broadcast_shapes(*(t.shape for t in group)))


def test_a_remembered_broadcast_is_not_shared_with_the_caller(runtime):
    group = (torch.empty(2, 3, 4), torch.empty(3, 1))
    first = runtime["_kf_broadcast"](group)
    first.append(99)  # a caller's edit must not reach the next call's answer
    assert runtime["_kf_broadcast"](group) == [2, 3, 4]


class _BatchNormExt:
    """Stands in for a batch-norm region's host functions: `kf_r0` normalises over dims (0, 2, 3) and writes
    {mean, M2, count} per channel into `stats`; `kf_r0_bn` declines (None) or answers, as kf_running_stats_covers
    decides on the device."""

    def __init__(self, covers: bool) -> None:
        self.covers, self.calls = covers, []

    def kf_r0(self, ins, sc, shape, mask, out_shape, geo, stats):
        self.calls.append(("kf_r0", mask, tuple(stats.shape)))
        x = ins[0]
        mean = x.mean(dim=(0, 2, 3))
        m2 = ((x - mean.view(1, -1, 1, 1)) ** 2).sum(dim=(0, 2, 3))
        stats.copy_(torch.stack([mean, m2, torch.full_like(mean, x.numel() / x.shape[1])], dim=1))
        return torch.batch_norm(x, None, None, None, None, True, 0.0, 1e-5, False)

    def kf_r0_bn(self, ins, sc, shape, mask, mean, var, batches, cumulative, momentum):
        self.calls.append(("kf_r0_bn", mask, cumulative, momentum) + (() if batches.numel() else ("no counter",)))
        return torch.zeros(shape) if self.covers else None


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_region_updates_running_statistics_as_pytorch_when_the_device_update_declines(runtime, momentum):
    torch.manual_seed(0)
    x = torch.randn(4, 3, 5, 6, dtype=torch.float64)
    ref = nn.BatchNorm2d(3, momentum=momentum, dtype=torch.float64)  # float64 buffers: the device update declines
    ours = nn.BatchNorm2d(3, momentum=momentum, dtype=torch.float64)
    ext = _BatchNormExt(covers=False)
    for _ in range(3):
        want = ref(x)
        got = runtime["_kf_batch_norm"](ext.kf_r0, ext.kf_r0_bn, (x,), [], list(x.shape), 13, ours.running_mean,
                                         ours.running_var, ours.num_batches_tracked, ours.momentum)
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(ours.running_mean, ref.running_mean)
    torch.testing.assert_close(ours.running_var, ref.running_var)
    assert int(ours.num_batches_tracked) == 3
    assert ext.calls[:2] == [("kf_r0_bn", 13, momentum is None, 0.0 if momentum is None else momentum),
                             ("kf_r0", 13, (3, 3))]


def test_batch_norm_region_takes_the_one_call_path_when_it_covers_and_skips_missing_buffers(runtime):
    x = torch.randn(2, 3, 4, 4)
    bn = nn.BatchNorm2d(3)
    ext = _BatchNormExt(covers=True)
    out = runtime["_kf_batch_norm"](ext.kf_r0, ext.kf_r0_bn, (x,), [], list(x.shape), 13, bn.running_mean, bn.running_var,
                                     bn.num_batches_tracked, bn.momentum)
    assert torch.equal(out, torch.zeros(2, 3, 4, 4)) and [c[0] for c in ext.calls] == ["kf_r0_bn"]
    untracked = nn.BatchNorm2d(3, track_running_stats=False)  # no buffers: the plain kernel, nothing to update
    ext = _BatchNormExt(covers=True)
    runtime["_kf_batch_norm"](ext.kf_r0, ext.kf_r0_bn, (x,), [], list(x.shape), 13, untracked.running_mean,
                              untracked.running_var, untracked.num_batches_tracked, untracked.momentum)
    assert [c[0] for c in ext.calls] == ["kf_r0"]


def test_functional_batch_norm_buffers_without_a_counter_take_the_one_call_path(runtime):
    # F.batch_norm(x, running_mean, running_var, training=True): no num_batches_tracked, a numeric momentum
    x = torch.randn(2, 3, 4, 4)
    mean, var = torch.zeros(3), torch.ones(3)
    ext = _BatchNormExt(covers=True)
    runtime["_kf_batch_norm"](ext.kf_r0, ext.kf_r0_bn, (x,), [], list(x.shape), 13, mean, var, None, 0.1)
    assert ext.calls == [("kf_r0_bn", 13, False, 0.1, "no counter")]
    ext = _BatchNormExt(covers=True)  # a region emitted without the device update (no running buffers planned)
    runtime["_kf_batch_norm"](ext.kf_r0, None, (x,), [], list(x.shape), 13, mean, var, None, 0.1)
    assert [c[0] for c in ext.calls] == ["kf_r0"]


def test_running_stats_after_a_reduction_prologue_take_the_device_update_without_a_counter(runtime):
    # A batch norm inside a reduction's prologue updates its buffers through `_kf_running_stats`; F.batch_norm's
    # buffers have no counter there either, and the device update must still be asked (as in _kf_batch_norm).
    calls = []

    def update(stats, mean, var, batches, cumulative, momentum, count):
        calls.append((batches.numel(), cumulative, momentum, count))
        return True

    stats = torch.tensor([[0.5, 2.0, 4.0], [1.0, 6.0, 4.0]])
    mean, var = torch.zeros(2), torch.ones(2)
    runtime["_kf_running_stats"](update, mean, var, None, 0.1, stats, 4.0)
    assert calls == [(0, False, 0.1, 4.0)]
    assert torch.equal(mean, torch.zeros(2))  # the device did it: PyTorch's ops were not run as well
    declined = []
    runtime["_kf_running_stats"](lambda *a: declined.append(a) or False, mean, var, None, 0.1, stats, 4.0)
    assert len(declined) == 1
    torch.testing.assert_close(mean, torch.tensor([0.05, 0.1]))  # PyTorch's ops: 0.9 * 0 + 0.1 * mean
    torch.testing.assert_close(var, torch.tensor([0.9 + 0.1 * 2.0 / 3, 0.9 + 0.1 * 6.0 / 3]))


def test_a_conv_anchor_covers_stock_and_read_once_parametrised_convs_only(runtime):
    # weight_norm computes `weight` from its parameters alone on each read; spectral norm's read in training
    # runs a power iteration that updates its vectors (the module's own call must make that read); a hook
    # would be skipped by the anchor's functional call.
    stock = runtime["_kf_stock_conv"]
    assert stock(nn.Conv2d(3, 4, 1)) and stock(nn.ConvTranspose1d(3, 4, 1))
    assert stock(nn.utils.parametrizations.weight_norm(nn.Conv3d(3, 4, 1)))
    spectral = nn.utils.parametrizations.spectral_norm(nn.Conv2d(3, 4, 1))
    assert not stock(spectral)
    assert stock(spectral.eval())
    both = nn.utils.parametrizations.weight_norm(nn.Conv2d(3, 4, 1), name="bias", dim=0)
    assert not stock(both), "a parametrised bias: not the stock call's bias"
    hooked = nn.Conv2d(3, 4, 1)
    hooked.register_forward_pre_hook(lambda m, i: None)
    assert not stock(hooked)
    assert not stock(nn.Linear(3, 4))

    class Sub(nn.Conv2d):
        def forward(self, x):
            return super().forward(x) * 2

    assert not stock(nn.utils.parametrizations.weight_norm(Sub(3, 4, 1))), "its own forward"
