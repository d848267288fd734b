"""MaxPool2d, kernel 3, stride 2, padding 1 over an NCHW tensor.

64 x 64 x 224 x 224 fp32 (205 M elements) down to 112 x 112: overlapping windows with padding.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


batch_size = 64
channels = 64
height = 224
width = 224


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [3, 2, 1]
