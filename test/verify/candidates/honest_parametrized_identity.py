# Honest (false-flag sweep, 2026-11-30): the reference's forward, copied (the identity).
"""Reparametrised layers: weight_norm and orthogonal parametrizations (torch.nn.utils.parametrizations)."""
import torch
import torch.nn as nn
from torch.nn.utils import parametrizations as P


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.a = P.weight_norm(nn.Linear(features, features))
        self.b = P.orthogonal(nn.Linear(features, features))

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))

