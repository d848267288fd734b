"""Tanh-approximated GELU (nn.GELU(approximate="tanh")) over an fp16 matrix with odd rows.

12288 x 24575 fp16 (302 M elements, 604 MB): rows of an odd length break 16-byte alignment per row, so
a vectorised kernel must treat the tensor as flat or handle ragged row ends.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        return self.act(x)


batch_size = 12288
dim = 24575


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=torch.float16)]


def get_init_inputs():
    return []
