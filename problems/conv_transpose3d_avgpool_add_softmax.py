"""ConvTranspose3d (stride 2), AvgPool3d(2), add a per-channel bias, softmax over channels.

32 x 16 x 16 x 48 x 48 fp32 input upsampled to 32 x 96 x 96 with 32 channels (302 M elements), then
pooled back down by 8x before a strided softmax.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.avg_pool = nn.AvgPool3d(kernel_size=2)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.1)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.avg_pool(x)
        x = x + self.bias
        return torch.softmax(x, dim=1)


batch_size = 32
in_channels = 16
out_channels = 32
depth, height, width = 16, 48, 48
kernel_size = 3
stride = 2
padding = 1
output_padding = 1
bias_shape = (out_channels, 1, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape]
