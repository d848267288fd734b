# Pattern 17: "optimised" by calling the very operator being replaced.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
