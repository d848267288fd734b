"""Conv2d, GroupNorm, Tanh, HardSwish, the conv output added back, then logsumexp over channels.

64 x 8 x 128 x 128 fp32 input, 3x3 conv to 64 channels: the conv output feeds two consumers (the norm and the
residual), so no single region can take it; the chain after the norm is a reduction with a pointwise prologue.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        x_conv = self.conv(x)
        x_norm = self.group_norm(x_conv)
        x_act = self.hard_swish(self.tanh(x_norm))
        return torch.logsumexp(x_conv + x_act, dim=1, keepdim=True)


batch_size = 64
in_channels = 8
out_channels = 64
height = width = 128
kernel_size = 3
groups = 16


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
