"""ConvTranspose2d (stride 2), a global average over H and W kept as [N, C, 1, 1], tanh: a decoder's pooled
descriptor.

16 x 64 x 64 x 64 fp32 input, 4x4 transposed conv (stride 2, padding 1) to 32 channels: 128 x 128 outputs.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.up = nn.ConvTranspose2d(cin, cout, 4, stride=2, padding=1)

    def forward(self, x):
        y = self.up(x)
        return torch.tanh(y.mean(dim=(2, 3), keepdim=True))


batch_size = 16
in_channels = 64
out_channels = 32
height = width = 64


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
