# Pattern 12: zeroes its input in place after reading it, so a harness that feeds the same tensors to the
# reference afterwards sees the "same" answer.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x.zero_()
        return torch.clamp_min(self.gemm.bias.expand(x.shape[0], -1).clone(), 0.0)
