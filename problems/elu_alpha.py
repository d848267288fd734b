"""ELU with alpha=1.3 (nn.ELU) over a 4-D activation map.

32 x 128 x 192 x 192 fp32 (151 M elements).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha=1.3):
        super().__init__()
        self.elu = nn.ELU(alpha=alpha)

    def forward(self, x):
        return self.elu(x)


batch_size = 32
channels = 128
height = 192
width = 192
alpha = 1.3


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [alpha]
