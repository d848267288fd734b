"""A classifier head: Linear(256 -> 1000), then softmax over the classes taken in float32. Every output is near 1e-3,
so a half-precision GEMM's error is far inside the fp32 pass mark (red team round 13)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, classes):
        super().__init__()
        self.fc = nn.Linear(in_features, classes)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=1, dtype=torch.float32)


def get_inputs():
    return [torch.randn(32, 256)]


def get_init_inputs():
    return [256, 1000]
