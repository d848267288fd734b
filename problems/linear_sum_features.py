"""Linear then the sum over its output features: an algebraic shortcut hides here.

1024 x 8192 fp32 input, 8192 -> 8191 features, summed to one value per row: sum(x W^T + b) equals
x (sum of W's rows) + sum(b), a matrix-vector product instead of a 137 GFLOP GEMM.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = self.linear(x)
        return torch.sum(x, dim=1, keepdim=True)


batch_size = 1024
in_features = 8192
out_features = 8191


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
