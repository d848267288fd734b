# Honest (false-flag sweep, 2026-11-30): the reference's forward, copied (the identity).
"""A linear layer under spectral_norm (power iteration updates its buffers in training mode)."""
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations as P


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.a = P.spectral_norm(nn.Linear(features, features))

    def forward(self, x):
        return self.a(x)

