"""Mean of a whole tensor to a scalar.

8192 x 25000 fp32 (205 M elements) reduced to one value: the reduction must be split across the GPU.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x)


batch_size = 8192
dim = 25000


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
