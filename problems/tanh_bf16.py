"""Tanh (torch.tanh) over a large bf16 matrix.

16384 x 16384 bf16 (268 M elements, 537 MB in and out); the math should run in fp32.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x)


batch_size = 16384
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
