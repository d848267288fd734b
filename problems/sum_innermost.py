"""Sum over the innermost dimension of a 2-D tensor (keepdim).

16000 x 12001 fp32 (192 M elements): one contiguous row per output, odd row length.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


batch_size = 16000
features = 12001
reduce_dim = -1


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [reduce_dim]
