# Honest: the constructor's scale and shift kept as attributes and read at every call (a fused addmm, in place).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale, shift):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scale = float(scale)
        self.shift = float(shift)

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t()).clamp_min_(0)
        return y.mul_(self.scale).add_(self.shift)
