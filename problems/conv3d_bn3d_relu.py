"""Conv3d, BatchNorm3d in training mode, ReLU: a 3-D CNN block (video, volumetric data), un-folded.

8 x 16 x 16 x 48 x 48 fp32 input, 3x3x3 conv (padding 1) to 32 channels; BatchNorm uses batch statistics and
updates its running stats each call.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = nn.Conv3d(cin, cout, k, padding=1)
        self.bn = nn.BatchNorm3d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


batch_size = 8
in_channels = 16
out_channels = 32
depth = 16
height = width = 48
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
