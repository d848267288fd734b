# Honest (false-flag sweep, 2026-11-30): the same helper without torch.compile (addmm, then the exact GELU).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.proj = nn.Linear(features, features)

    def forward(self, x):
        return F.gelu(torch.addmm(self.proj.bias, x, self.proj.weight.t()))
