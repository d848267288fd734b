"""Conv3d, min over the depth dim, softmax over channels.

64 x 3 x 24 x 64 x 64 fp32 input, 3x3x3 conv to 24 channels: a strided min then a strided softmax.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, dim=self.dim)[0]
        return torch.softmax(x, dim=1)


batch_size = 64
in_channels = 3
out_channels = 24
depth = 24
height = width = 64
kernel_size = 3
reduce_dim = 2


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, reduce_dim]
