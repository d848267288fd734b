"""Max over dim 1 of a 5-D NCDHW tensor (torch.max(x, dim=1)[0]).

16 x 64 x 32 x 64 x 96 fp32 (201 M elements): strided reduction over channels; only the values are used.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.max(x, dim=1)[0]


batch_size = 16
channels = 64
depth = 32
height = 64
width = 96


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
