"""Swish times a scale plus a residual: x * sigmoid(x) * scale + residual.

8192 x 12288 fp32, two inputs: a small DAG that reuses x; the scale is a learnable scalar parameter.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(scale))

    def forward(self, x, residual):
        return x * torch.sigmoid(x) * self.scale + residual


batch_size = 8192
dim = 12288
scale = 1.7


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [scale]
