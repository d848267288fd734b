"""Sigmoid written as a Tensor method (x.sigmoid()) over a large fp32 matrix.

8192 x 20000 (164 M elements).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sigmoid()


batch_size = 8192
dim = 20000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
