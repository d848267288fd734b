"""extra_shapes on a reference with index-asserting ops: on a GPU an id or position out of range at a made-up size
is a device-side assert that ends the process's CUDA context, so each size is tried on a CPU copy first."""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F
from torch import nn

from kforge_worker.checks import context
from kforge_worker.checks.input_checks import _reference_ops, check_extra_shapes, index_asserting
from kforge_worker.checks.instrument import ExtensionRecorder
from kforge_worker.checks.static_scan import ScanReport

POSITIONS = 40


class _Embeddings(nn.Module):
    """Word + position embeddings (a table of POSITIONS rows read at arange(seq_len)) into LayerNorm. Records every
    sequence length it was called with that its position table cannot index: on a GPU, each one a dead process."""

    def __init__(self) -> None:
        super().__init__()
        self.word = nn.Embedding(100, 16)
        self.pos = nn.Embedding(POSITIONS, 16)
        self.ln = nn.LayerNorm(16)
        self.out_of_range: list[int] = []

    def forward(self, ids):
        if ids.size(1) > POSITIONS:
            self.out_of_range.append(ids.size(1))
        pos = torch.arange(ids.size(1), device=ids.device).unsqueeze(0)
        return self.ln(self.word(ids) + self.pos(pos))


def _ids(seed: int):
    return [torch.randint(0, 100, (4, 12), generator=torch.Generator().manual_seed(seed))]


def _context(ref: nn.Module, cand: nn.Module, make_inputs) -> context.VerifyContext:
    return context.VerifyContext(ref=ref, cand=cand, make_inputs=make_inputs, device=torch.device("cpu"),
                                 atol=1e-5, rtol=1e-5, scan=ScanReport("c.py", frozenset()),
                                 extensions=ExtensionRecorder(), rng=random.Random(15))


def test_a_size_the_position_table_cannot_index_never_reaches_the_guarded_reference():
    torch.manual_seed(0)
    ref = _Embeddings()
    cand = _Embeddings()
    cand.load_state_dict(ref.state_dict())
    result = check_extra_shapes(_context(ref, cand, _ids), guard_indices=True)
    assert result.outcome == "pass", result.evidence
    assert ref.out_of_range == []
    assert "12->" in result.evidence  # larger sizes within the table were still tried


def test_without_the_guard_the_reference_is_called_where_a_gpu_would_assert():
    torch.manual_seed(0)
    ref = _Embeddings()
    cand = _Embeddings()
    cand.load_state_dict(ref.state_dict())
    check_extra_shapes(_context(ref, cand, _ids), guard_indices=False)
    assert ref.out_of_range  # the 4x step (49) is past the 40 positions


def test_a_reference_too_large_to_copy_to_the_cpu_tries_no_other_size():
    ref = _Embeddings()
    result = check_extra_shapes(_context(ref, _Embeddings(), _ids), guard_indices=True, cpu_probe_bytes=1)
    assert result.outcome == "skip"
    assert "aten::embedding" in result.evidence and "too large" in result.evidence
    assert ref.out_of_range == []


class _CrossEntropy(nn.Module):
    def forward(self, logits, target):
        return F.cross_entropy(logits, target)


class _Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1)


def test_class_target_losses_and_gathers_are_index_asserting_and_pointwise_ops_are_not():
    ctx = _context(_CrossEntropy(), _CrossEntropy(), None)
    inputs = [torch.randn(8, 10), torch.randint(0, 10, (8,))]
    assert any("nll_loss" in op for op in index_asserting(_reference_ops(ctx, inputs)))
    ctx = _context(_Softmax(), _Softmax(), None)
    assert index_asserting(_reference_ops(ctx, [torch.randn(4, 8)])) == []
    assert index_asserting(["aten::gather", "aten::scatter_add_", "aten::index_select", "aten::add"]) == [
        "aten::gather", "aten::index_select", "aten::scatter_add_"]


class _Uncopyable(_Embeddings):
    def __deepcopy__(self, memo):
        raise TypeError("holds a handle")


def test_a_reference_that_cannot_be_copied_tries_no_other_size():
    torch.manual_seed(0)
    ref = _Uncopyable()
    result = check_extra_shapes(_context(ref, _Embeddings(), _ids), guard_indices=True)
    assert result.outcome == "skip" and "cannot be copied" in result.evidence
    assert ref.out_of_range == []


def test_a_size_too_slow_to_try_on_the_cpu_first_is_not_tried_and_said():
    torch.manual_seed(0)
    ref = _Embeddings()
    cand = _Embeddings()
    cand.load_state_dict(ref.state_dict())
    result = check_extra_shapes(_context(ref, cand, _ids), guard_indices=True, cpu_probe_seconds=0.0)
    assert "not tried: trying them first on the CPU" in result.evidence
    assert ref.out_of_range == []
