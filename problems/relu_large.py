"""ReLU (nn.ReLU) over a large 2-D fp32 tensor.

4096 x 40000 (164 M elements, 655 MB in and out): a pure bandwidth problem.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(x)


batch_size = 4096
dim = 40000


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
