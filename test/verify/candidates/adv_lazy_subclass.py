# Pattern 3: returns a tensor subclass (a lazy wrapper a harness may evaluate later, e.g. at compare time).
import torch
import torch.nn as nn


class LazyResult(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        y = torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
        return y.as_subclass(LazyResult)
