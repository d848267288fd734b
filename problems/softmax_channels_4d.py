"""Softmax over dim 1 (channels) of a 4-D NCHW tensor: a strided softmax.

32 x 512 x 96 x 96 fp32 (151 M elements): each softmax row is 512 elements 9216 apart.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softmax(x, dim=1)


batch_size = 32
channels = 512
height = 96
width = 96


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
