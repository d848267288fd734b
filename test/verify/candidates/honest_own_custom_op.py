# Honest: the fused bias + ReLU registered as an operator of its own namespace (torch.library.custom_op),
# so it composes with the dispatcher like any torch op. A new operator, not one the reference runs.
import torch
import torch.nn as nn


@torch.library.custom_op("kforge_honest::bias_relu", mutates_args=())
def bias_relu(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return (y + bias).clamp_min_(0)


@bias_relu.register_fake
def _(y, bias):
    return torch.empty_like(y)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return bias_relu(x @ self.gemm.weight.t(), self.gemm.bias)
