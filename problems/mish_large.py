"""Mish (nn.Mish: x * tanh(softplus(x))) over a large fp32 matrix.

4096 x 32769 (134 M elements): softplus, tanh and a multiply per element.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.mish = nn.Mish()

    def forward(self, x):
        return self.mish(x)


batch_size = 4096
dim = 32769


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
