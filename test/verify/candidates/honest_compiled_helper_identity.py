# Honest (false-flag sweep, 2026-11-30): the reference's forward, copied (the identity).
"""A helper compiled with torch.compile (eager backend), compiled lazily at its first call."""
import torch
import torch.nn as nn


@torch.compile(backend="eager")
def _fused(x, w, b):
    return torch.nn.functional.gelu(x @ w.t() + b)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return _fused(x, self.proj.weight, self.proj.bias)

