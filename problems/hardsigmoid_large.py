"""Hardsigmoid (F.hardsigmoid) over a large fp32 matrix.

4095 x 32768 (134 M elements); inputs span the three pieces of the function.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.hardsigmoid(x)


batch_size = 4095
dim = 32768


def get_inputs():
    return [torch.randn(batch_size, dim) * 4]


def get_init_inputs():
    return []
