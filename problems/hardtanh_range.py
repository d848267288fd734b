"""Hardtanh clamped to [-2, 2] (F.hardtanh) over a large fp32 matrix.

8192 x 16384 (134 M elements); inputs are scaled so that both bounds clip.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, min_val=-2.0, max_val=2.0):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x):
        return F.hardtanh(x, min_val=self.min_val, max_val=self.max_val)


batch_size = 8192
dim = 16384
min_val = -2.0
max_val = 2.0


def get_inputs():
    return [torch.randn(batch_size, dim) * 3]


def get_init_inputs():
    return [min_val, max_val]
