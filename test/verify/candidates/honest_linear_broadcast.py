# Honest: the GEMM as a broadcast multiply-and-reduce (no PyTorch GEMM), then relu.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        y = (x[:, None, :] * w[None, :, :]).sum(-1) + b
        return torch.clamp_min(y, 0.0)
