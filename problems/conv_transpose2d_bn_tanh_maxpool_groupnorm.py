"""ConvTranspose2d, BatchNorm2d (training), Tanh, MaxPool2d, GroupNorm: two normalisations around a pool.

32 x 32 x 64 x 64 fp32 input, 4x4 stride-2 transposed conv to 64 channels (128 x 128), batch statistics and
running-stat updates as in training, a 2x2 max pool, then group norm with 8 groups.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.batch_norm = nn.BatchNorm2d(out_channels)
        self.tanh = nn.Tanh()
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        x = self.tanh(self.batch_norm(self.conv_transpose(x)))
        return self.group_norm(self.max_pool(x))


batch_size = 32
in_channels = 32
out_channels = 64
height = width = 64
kernel_size = 4
stride = 2
padding = 1
num_groups = 8


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, num_groups]
