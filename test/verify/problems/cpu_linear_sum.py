"""A linear layer summed over its outputs (KernelBench's Gemm-then-sum pattern), small enough for a CPU: the sum of
a row's outputs nearly cancels in some rows, so any correct reordering of the arithmetic is far off the reference in
relative terms there."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sum(self.linear(x), dim=1, keepdim=True)


batch_size = 512
in_features = 1024
out_features = 1024


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
