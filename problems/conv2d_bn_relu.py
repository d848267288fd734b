"""Conv2d, BatchNorm2d in training mode, ReLU: the classic ResNet stem block, un-folded.

64 x 32 x 160 x 160 fp32 input, 3x3 conv (padding 1) to 64 channels. BatchNorm uses batch statistics and
updates its running stats each call, so it cannot be folded into the conv weights.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


batch_size = 64
in_channels = 32
out_channels = 64
height = width = 160
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
