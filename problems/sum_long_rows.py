"""Sum of a few very long rows: 16 rows of 16.7 M elements each.

16 x 16777213 fp32 (268 M elements, 1.07 GB): one block per row would use 16 SMs; the reduction has to be
split across thread blocks.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1)


num_rows = 16
row_length = 16777213


def get_inputs():
    return [torch.randn(num_rows, row_length)]


def get_init_inputs():
    return []
