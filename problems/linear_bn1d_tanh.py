"""Linear, BatchNorm1d in training mode, tanh.

4096 x 2048 fp32 input, 2048 -> 4096 features; BatchNorm uses batch statistics (a column reduction of the
GEMM output) and updates its running stats each call.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, eps, momentum):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=eps, momentum=momentum)

    def forward(self, x):
        x = self.linear(x)
        x = self.bn(x)
        return torch.tanh(x)


batch_size = 4096
in_features = 2048
out_features = 4096
eps = 1e-5
momentum = 0.1


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, eps, momentum]
