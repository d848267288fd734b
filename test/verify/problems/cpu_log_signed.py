"""log of signed values: about half of every output is NaN, by the problem's own definition."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log(x) * 2.0


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
