"""AvgPool1d, kernel 8, stride 4, padding 2 over an (N, C, L) tensor of odd length.

64 x 256 x 8191 fp32 (134 M elements) down to 2047 positions.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


batch_size = 64
channels = 256
length = 8191


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [8, 4, 2]
