# Right everywhere but one element per call, off by 0.5: a mismatch fraction of 1/3072 (a rule that allows a small
# share of elements outside the band would pass it). Which element moves with the call count.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.calls = 0

    def forward(self, x):
        y = torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
        self.calls += 1
        flat = y.view(-1)
        flat[(self.calls * 977) % flat.numel()] += 0.5
        return y
