"""Adaptive average pooling of a 56 x 56 map to 6 x 6 (F.adaptive_avg_pool2d).

128 x 512 x 56 x 56 fp32 (205 M elements): 56 is not a multiple of 6, so windows vary and overlap.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


batch_size = 128
channels = 512
height = 56
width = 56


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [(6, 6)]
