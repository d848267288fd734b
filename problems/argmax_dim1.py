"""Argmax over the middle dim of a 3-D tensor (int64 output).

256 x 1000 x 800 fp32 (205 M elements): a strided arg-reduction; ties go to the first index.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmax(x, dim=self.dim)


batch_size = 256
dim1 = 1000
dim2 = 800


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [1]
