"""InstanceNorm2d (no affine, no running stats) over an NCHW tensor.

48 x 64 x 224 x 224 fp32 (154 M elements): one 50176-element segment per (sample, channel).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)

    def forward(self, x):
        return self.inorm(x)


batch_size = 48
channels = 64
height = 224
width = 224


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
