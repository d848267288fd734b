# The whole GEMM + ReLU wrapped in a torch.library.custom_op of the candidate's own namespace: no custom kernel,
# only PyTorch (aten::addmm) inside the op's body.
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.library.custom_op("rt15_fused::linear_relu", mutates_args=())
def linear_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.relu(F.linear(x, w, b))


@linear_relu.register_fake
def _(x, w, b):
    return x.new_empty(x.shape[0], w.shape[0])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return linear_relu(x, self.gemm.weight, self.gemm.bias)
