"""SiLU (F.silu) over a 4-D activation map.

64 x 64 x 256 x 160 fp32 (168 M elements): the shape of a conv activation, applied out of place.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.silu(x)


batch_size = 64
channels = 64
height = 256
width = 160


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
