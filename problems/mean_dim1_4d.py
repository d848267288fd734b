"""Mean over dim 1 (channels) of a 4-D NCHW tensor: a strided reduction.

64 x 256 x 128 x 96 fp32 (201 M elements): the reduced elements are H*W apart in memory.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=1)


batch_size = 64
channels = 256
height = 128
width = 96


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
