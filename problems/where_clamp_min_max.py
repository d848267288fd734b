"""A where / clamp / minimum / maximum chain over two inputs and a per-column bound.

16384 x 6000 fp32: where picks a branch on a threshold, clamps, takes the minimum against a second
input and the maximum against a learnable per-column floor (broadcast over rows).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, threshold):
        super().__init__()
        self.threshold = threshold
        self.floor = nn.Parameter(torch.randn(dim) * 0.1 - 0.5)

    def forward(self, x, y):
        z = torch.where(x > self.threshold, x * 2.0, x * 0.5)
        z = torch.clamp(z, min=-1.5, max=3.0)
        z = torch.minimum(z, y)
        return torch.max(z, self.floor)


batch_size = 16384
dim = 6000
threshold = 0.25


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim) + 1.0]


def get_init_inputs():
    return [dim, threshold]
