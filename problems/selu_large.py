"""SELU (torch.selu) over a large fp32 matrix with an odd row length.

16384 x 8191 (134 M elements).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.selu(x)


batch_size = 16384
dim = 8191


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
