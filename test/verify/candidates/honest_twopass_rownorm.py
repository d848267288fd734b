# Honest: two passes (mean, then the centred second moment).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        m = x.mean(dim=-1, keepdim=True)
        d = x - m
        var = (d * d).mean(dim=-1, keepdim=True)
        return d * torch.rsqrt(var + 1e-5)
