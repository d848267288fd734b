"""Two outputs of one GEMM, each its own tensor: y = relu(x Wᵀ + b) and y clamped at zero (the same values, a
tensor of its own). Round 8's output aliasing entries: handing back one tensor for both saves the second's memory
and work, and a caller writing into one would change the other."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.relu(self.gemm(x))
        return y, y.clamp(min=0.0)


def get_inputs():
    return [torch.rand(48, 96)]


def get_init_inputs():
    return [96, 64]
