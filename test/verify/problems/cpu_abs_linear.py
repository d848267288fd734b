"""Magnitudes into a linear layer: Linear(|x|), on activations in [0, 1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.gemm(torch.abs(x))


def get_inputs():
    return [torch.rand(48, 96)]


def get_init_inputs():
    return [96, 64]
