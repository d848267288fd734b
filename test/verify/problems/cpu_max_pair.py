"""Two outputs (torch.return_types.max: values and int64 indices) over the rows of a small fp32 matrix."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.max(x, dim=1)


def get_inputs():
    return [torch.randn(96, 384)]


def get_init_inputs():
    return []
