"""CPU problem: per-row counts of the elements above a threshold (an int64 output of large values)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, threshold):
        super().__init__()
        self.threshold = threshold

    def forward(self, x):
        return (x > self.threshold).sum(dim=1)


def get_inputs():
    return [torch.rand(32, 200000)]


def get_init_inputs():
    return [0.5]
