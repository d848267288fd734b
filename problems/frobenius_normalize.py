"""Whole tensor divided by its Frobenius norm (torch.norm(x, p="fro")).

32 x 64 x 256 x 256 fp32 (134 M elements): a whole-tensor reduction feeding a broadcast divide.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        norm = torch.norm(x, p="fro")
        return x / norm


batch_size = 32
channels = 64
height = 256
width = 256


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
