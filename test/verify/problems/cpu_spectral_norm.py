"""A linear layer under spectral_norm (power iteration updates its buffers in training mode)."""
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations as P


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.a = P.spectral_norm(nn.Linear(features, features))

    def forward(self, x):
        return self.a(x)


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
