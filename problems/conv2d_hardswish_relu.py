"""Conv2d, Hardswish, ReLU.

128 x 16 x 128 x 128 fp32 input, 3x3 conv to 64 channels (130 M-element output), two activations.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = F.hardswish(x)
        return F.relu(x)


batch_size = 128
in_channels = 16
out_channels = 64
height = width = 128
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
