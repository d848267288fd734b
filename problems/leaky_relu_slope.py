"""LeakyReLU with negative slope 0.2 (nn.LeakyReLU) over a wide fp32 matrix.

1000 x 131072 (131 M elements): few rows, very wide.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, negative_slope=0.2):
        super().__init__()
        self.act = nn.LeakyReLU(negative_slope=negative_slope)

    def forward(self, x):
        return self.act(x)


batch_size = 1000
dim = 131072
negative_slope = 0.2


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope]
