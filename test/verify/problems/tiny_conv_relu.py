"""Tiny convolution problem for the verification corpus: relu(conv2d(x) + b) * scale. The convolution is
the replaced operator (family `conv`)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.conv(x)) * self.scale


def get_inputs():
    return [torch.randn(2, 3, 17, 19)]


def get_init_inputs():
    return [3, 8, 3, 0.5]
