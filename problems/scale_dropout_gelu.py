"""Scale and shift, Dropout (p=0.2, active), GELU, plus the input: Dropout sits between fusable ops.

8192 x 8192 fp32. The model stays in training mode as KernelBench's do, so Dropout draws from the RNG on
every call; a correct rewrite must keep PyTorch's random stream (and so the exact mask).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, p):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) * 1.5)
        self.bias = nn.Parameter(torch.zeros(dim) + 0.1)
        self.dropout = nn.Dropout(p=p)

    def forward(self, x):
        y = x * self.weight + self.bias
        y = self.dropout(y)
        return F.gelu(y) + x


batch_size = 8192
dim = 8192
p = 0.2


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, p]
