"""Softmax over the rows of a 2-D tensor (torch.softmax, dim=1).

16384 x 12345 fp32 (202 M elements): rows of an odd length, larger than a warp-per-row kernel likes.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 16384
dim = 12345


def get_inputs():
    return [torch.randn(batch_size, dim) * 5]


def get_init_inputs():
    return []
