"""ConvTranspose2d (2x upsampling), InstanceNorm2d with affine parameters, a scale: a style-transfer decoder step.

16 x 64 x 64 x 64 fp32 input, 4x4 transposed conv (stride 2, padding 1) to 32 channels at 128 x 128.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout, scale):
        super().__init__()
        self.convt = nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1)
        self.norm = nn.InstanceNorm2d(cout, affine=True)
        self.scale = scale

    def forward(self, x):
        return self.norm(self.convt(x)) * self.scale


batch_size = 16
in_channels = 64
out_channels = 32
height = width = 64
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, scale]
