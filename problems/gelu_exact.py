"""Exact (erf) GELU via F.gelu over a large fp32 matrix.

8192 x 16384 (134 M elements): erf is costly enough that naive kernels fall off the bandwidth roof.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


batch_size = 8192
dim = 16384


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
