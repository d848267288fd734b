"""A transcendental chain: abs, sqrt, pow, log, exp and rsqrt over one input.

4096 x 30000 fp32 (123 M elements): seven pointwise ops that eager PyTorch runs as seven passes.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, exponent, eps):
        super().__init__()
        self.exponent = exponent
        self.eps = eps

    def forward(self, x):
        y = torch.sqrt(torch.abs(x) + 1.0)
        y = torch.pow(y, self.exponent)
        y = torch.log(y + self.eps) + torch.exp(-y)
        return y * torch.rsqrt(y * y + 1.0)


batch_size = 4096
dim = 30000
exponent = 1.5
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [exponent, eps]
