"""Problems with lazy modules (nn.LazyLinear, nn.LazyBatchNorm1d): their parameters are made at the first call, so
the harness makes that call when it builds the model — the same way in every process — and nothing else of the
model changes; a candidate whose first call cannot run on the CPU keeps its lazy tensors, which loading the
reference's state_dict makes."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from kforge_worker.checks.budget import nbytes
from kforge_worker.pipeline import seeded_build, sync_parameters


class LazyModel(nn.Module):
    def __init__(self, out_features: int) -> None:
        super().__init__()
        self.fc = nn.LazyLinear(out_features)
        self.bn = nn.LazyBatchNorm1d()
        self.drop = nn.Dropout(0.1)
        self.drop.eval()  # a submodule's own mode, which the build must not overwrite

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.bn(self.fc(x))))


class CudaOnlyLazy(LazyModel):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not x.is_cuda:
            raise RuntimeError("this kernel needs CUDA")
        return super().forward(x)


def example() -> list[torch.Tensor]:
    return [torch.randn(8, 32)]


def test_lazy_parameters_are_made_at_build_the_same_way_each_time_and_nothing_else_changes() -> None:
    a = seeded_build(torch, LazyModel, [16], seed=7, example=example)
    b = seeded_build(torch, LazyModel, [16], seed=7, example=example)
    assert not any(is_lazy(t) for t in [*a.parameters(), *a.buffers()])
    assert a.fc.weight.shape == (16, 32)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    assert torch.equal(a.bn.running_mean, torch.zeros(16)) and torch.equal(a.bn.running_var, torch.ones(16))
    assert int(a.bn.num_batches_tracked) == 0, "the making call is no step of the model's"
    assert a.training and a.fc.training and not a.drop.training


def test_a_candidate_whose_first_call_fails_on_the_cpu_keeps_its_lazy_tensors_and_takes_the_references() -> None:
    ref = seeded_build(torch, LazyModel, [16], seed=7, example=example)
    new = seeded_build(torch, CudaOnlyLazy, [16], seed=7, example=example, lazy_may_stay=True)
    assert is_lazy(new.fc.weight)
    assert sync_parameters(ref, new)["mode"] == "state_dict"
    assert torch.equal(new.fc.weight, ref.fc.weight)


def test_a_models_footprint_skips_tensors_a_lazy_module_has_not_made_yet() -> None:
    model = LazyModel(16)
    assert nbytes(model) == nbytes([t for t in [*model.parameters(), *model.buffers()] if not is_lazy(t)])
