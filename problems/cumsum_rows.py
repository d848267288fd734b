"""Cumulative sum along rows (torch.cumsum, dim=1).

4096 x 32000 fp32 (131 M elements): a scan, output the same size as the input.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


batch_size = 4096
length = 32000


def get_inputs():
    return [torch.rand(batch_size, length)]


def get_init_inputs():
    return [1]
