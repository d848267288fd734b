# Red team 2026-11-25 (round 2).
# Softmax with no max shift: exact for the benchmark's [0,1) inputs and randn x4 (exp(18) is fine), overflows
# to inf/inf on large magnitudes.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        e = torch.exp(x)
        return e / e.sum(dim=1, keepdim=True)
