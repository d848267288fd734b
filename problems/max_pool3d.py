"""MaxPool3d, kernel 3, stride 2, padding 1, dilation 1 over an NCDHW tensor.

16 x 32 x 48 x 96 x 96 fp32 (226 M elements, 906 MB) down to 24 x 48 x 48.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


batch_size = 16
channels = 32
depth = 48
height = 96
width = 96


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return [3, 2, 1]
