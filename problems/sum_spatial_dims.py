"""Sum over the two spatial dims (2, 3) of an NCHW tensor, keepdim.

128 x 256 x 72 x 72 fp32 (170 M elements): several reduced dims that are contiguous together (5184 each).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=(2, 3), keepdim=True)


batch_size = 128
channels = 256
height = 72
width = 72


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
