"""GroupNorm with 12 groups over 96 channels of an NCHW tensor (affine).

64 x 96 x 128 x 128 fp32 (101 M elements): each group is a contiguous segment of 8 x 16384 elements.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_groups, num_channels):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_channels)

    def forward(self, x):
        return self.gn(x)


batch_size = 64
num_groups = 12
channels = 96
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
