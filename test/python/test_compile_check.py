"""compile_check: torch.compile(reference)'s outputs put to the candidate's check (here on the CPU, with stand-ins
for the compiled call: what is checked is the comparison, not Inductor)."""

from __future__ import annotations

import types

import torch
import torch.nn as nn

from kforge_worker import compile_check

CPU = torch.device("cpu")


class ConvNorm(nn.Module):
    """A conv into a group norm: the shape where a TF32 conv fails the check (the norm scales its error up)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3)
        self.norm = nn.GroupNorm(2, 8)

    def forward(self, x):
        return self.norm(self.conv(x)), x.sum()


def _setup():
    torch.manual_seed(0)
    return ConvNorm(), [torch.randn(2, 4, 10, 10)]


def test_the_same_computation_passes() -> None:
    ref, inputs = _setup()
    found = compile_check.check(types.SimpleNamespace(), ref, lambda ins: ref(*ins), inputs, CPU)
    assert found == {"correct": True, "note": None}


def test_a_tf32_like_error_fails_with_the_outputs_message() -> None:
    ref, inputs = _setup()

    def coarse(ins):  # the conv's inputs rounded to 10 mantissa bits, as a TF32 convolution reads them
        x = ins[0]
        w = ref.conv.weight
        r = lambda t: (t.view(torch.int32) & ~0x1FFF).view(torch.float32)  # noqa: E731
        y = nn.functional.conv2d(r(x), r(w), ref.conv.bias)
        return ref.norm(y), x.sum()

    found = compile_check.check(types.SimpleNamespace(), ref, coarse, inputs, CPU)
    assert found["correct"] is False
    assert found["note"].startswith("output 0"), found["note"]


def test_a_problems_own_tolerance_is_the_one_applied() -> None:
    ref, inputs = _setup()
    off = lambda ins: tuple(o + 1e-3 for o in ref(*ins))  # noqa: E731
    assert compile_check.check(types.SimpleNamespace(), ref, off, inputs, CPU)["correct"] is False
    loose = types.SimpleNamespace(KFORGE_ATOL=1e-2, KFORGE_RTOL=1e-2)
    assert compile_check.check(loose, ref, off, inputs, CPU)["correct"] is True


def test_dropout_and_a_different_output_count() -> None:
    torch.manual_seed(0)
    dropping = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    found = compile_check.check(types.SimpleNamespace(), dropping, lambda ins: dropping(*ins), [torch.randn(3, 4)],
                                CPU)
    assert found["correct"] is None and "dropout" in found["note"]
    ref, inputs = _setup()
    found = compile_check.check(types.SimpleNamespace(), ref, lambda ins: ref(*ins)[0], inputs, CPU)
    assert found == {"correct": False, "note": "1 outputs against the reference's 2"}


def test_tf32_off_puts_both_switches_back() -> None:
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        with compile_check.tf32_off():
            assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
            assert not compile_check.tf32_allowed()
        assert torch.backends.cudnn.allow_tf32 is True
        assert compile_check.exact(lambda: torch.backends.cudnn.allow_tf32)() is False
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
