"""Conv2d, InstanceNorm2d (affine), LeakyReLU(0.2) in bfloat16: a style-transfer / GAN generator block.

16 x 64 x 128 x 128 bf16 input, 3x3 conv (padding 1) to 64 channels; module weights in bf16.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1).to(torch.bfloat16)
        self.norm = nn.InstanceNorm2d(cout, affine=True).to(torch.bfloat16)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


batch_size = 16
in_channels = 64
out_channels = 64
height = width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width).to(torch.bfloat16)]


def get_init_inputs():
    return [in_channels, out_channels]
