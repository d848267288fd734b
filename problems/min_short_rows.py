"""Minimum over many short rows (torch.amin over 67 columns).

3000000 x 67 fp32 (201 M elements): one thread block per row would waste almost every thread.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.amin(x, dim=-1)


num_rows = 3000000
row_length = 67


def get_inputs():
    return [torch.randn(num_rows, row_length)]


def get_init_inputs():
    return []
