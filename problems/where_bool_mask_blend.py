"""Blend of two activations under a boolean mask input: torch.where(mask, relu(x), 0.5 * y).

8192 x 8192 fp32 x and y and a same-shape bool mask (268 M bytes of data, 67 M of mask): a pointwise region
with a 1-byte operand, read four elements at a time beside 16-byte float loads.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, mask):
        return torch.where(mask, torch.relu(x), 0.5 * y)


rows = 8192
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols), torch.rand(rows, cols) < 0.5]


def get_init_inputs():
    return []
