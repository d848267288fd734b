"""AvgPool2d, kernel 3, stride 1, padding 1 (padding counted) over an NCHW tensor.

48 x 128 x 160 x 160 fp32 (157 M elements): a same-size 3x3 box filter.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


batch_size = 48
channels = 128
height = 160
width = 160


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [3, 1, 1]
