"""Standard deviation over dim 1 of a 3-D (N, C, L) tensor, keepdim: a strided std.

128 x 1000 x 1536 fp32 (197 M elements).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.std(dim=1, keepdim=True)


batch_size = 128
channels = 1000
length = 1536


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
