"""ConvTranspose2d (stride 2), bias add, clamp, scale, clamp, divide: five pointwise ops after the anchor.

64 x 64 x 64 x 64 fp32 input upsampled to 128 x 128; bias is a (C, 1, 1) parameter.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)
        self.scale = scale

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x + self.bias
        x = torch.clamp(x, min=0.0, max=1.0)
        x = x * self.scale
        x = torch.clamp(x, min=0.0, max=1.0)
        return x / self.scale


batch_size = 64
in_channels = 64
out_channels = 64
height = width = 64
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1)
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scale]
