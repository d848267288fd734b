"""Hardswish (nn.Hardswish) over a MobileNet-style 4-D activation map.

128 x 96 x 112 x 112 fp32 (154 M elements); inputs span the three pieces of the function.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(x)


batch_size = 128
channels = 96
height = 112
width = 112


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 4]


def get_init_inputs():
    return []
