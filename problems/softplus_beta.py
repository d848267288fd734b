"""Softplus with beta=2 and threshold=10 (F.softplus) over a large fp32 matrix.

2048 x 65535 (134 M elements). Above x * beta > threshold softplus is the identity; both branches are hit.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, beta=2.0, threshold=10.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x):
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


batch_size = 2048
dim = 65535
beta = 2.0
threshold = 10.0


def get_inputs():
    return [torch.randn(batch_size, dim) * 4]


def get_init_inputs():
    return [beta, threshold]
