"""Conv2d, a sum over the channels kept as a 1-channel map, sigmoid: a spatial attention gate.

32 x 32 x 128 x 128 fp32 input, 3x3 conv (padding 1) to 48 channels; the sum runs across channels, a strided axis
of the conv's output.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.sigmoid(y.sum(dim=1, keepdim=True))


batch_size = 32
in_channels = 32
out_channels = 48
height = width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
