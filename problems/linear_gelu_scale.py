"""Linear, exact GELU, multiply by a constant.

2048 x 3072 fp32 input, 3072 -> 6144 features (77 GFLOP).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.fc(x)
        x = F.gelu(x)
        return x * self.scaling_factor


batch_size = 2048
in_features = 3072
out_features = 6144
scaling_factor = 1.25


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scaling_factor]
