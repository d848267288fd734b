"""Conv2d, GroupNorm (32 groups of 4 channels), SiLU written out as y * sigmoid(y): a diffusion U-Net block, fp16.

32 x 64 x 96 x 96 fp16 input, 3x3 conv (padding 1) to 128 channels; module weights in fp16.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, groups):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1).half()
        self.gn = nn.GroupNorm(groups, cout).half()

    def forward(self, x):
        y = self.gn(self.conv(x))
        return y * torch.sigmoid(y)


batch_size = 32
in_channels = 64
out_channels = 128
height = width = 96
num_groups = 32


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width).half()]


def get_init_inputs():
    return [in_channels, out_channels, num_groups]
