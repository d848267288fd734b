"""ConvTranspose3d (stride 2), LayerNorm over the last (width) dim, GELU, scale.

16 x 32 x 16 x 32 x 32 fp32 input upsampled to 32 x 64 x 64 with 64 channels (134 M elements);
the LayerNorm's normalized_shape is the output width.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, norm_width, eps, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.layer_norm = nn.LayerNorm(norm_width, eps=eps)
        self.scale = scale

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.layer_norm(x)
        x = F.gelu(x)
        return x * self.scale


batch_size = 16
in_channels = 32
out_channels = 64
depth, height, width = 16, 32, 32
kernel_size = 4
stride = 2
padding = 1
norm_width = 2 * width
eps = 1e-5
scale = 0.8


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, norm_width, eps, scale]
