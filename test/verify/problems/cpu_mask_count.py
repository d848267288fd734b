"""Boolean and integer outputs: where each row is above its mean (bool) and how many per row (int64)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        above = x > x.mean(dim=1, keepdim=True)
        return above, above.sum(dim=1)


def get_inputs():
    return [torch.randn(128, 200)]


def get_init_inputs():
    return []
