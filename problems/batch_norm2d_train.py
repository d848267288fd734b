"""BatchNorm2d in training mode over an NCHW tensor: batch statistics, running stats updated.

32 x 96 x 224 x 224 fp32 (154 M elements): 96 channels of 1.6 M elements each, strided by sample.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features, momentum):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features, momentum=momentum)

    def forward(self, x):
        return self.bn(x)


batch_size = 32
channels = 96
height = 224
width = 224
momentum = 0.1


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 2 + 0.5]


def get_init_inputs():
    return [channels, momentum]
