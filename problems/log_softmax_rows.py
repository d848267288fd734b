"""Log-softmax over the rows of a 2-D tensor (nn.LogSoftmax, dim=1).

32768 x 4095 fp32 (134 M elements).
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.log_softmax = nn.LogSoftmax(dim=1)

    def forward(self, x):
        return self.log_softmax(x)


batch_size = 32768
dim = 4095


def get_inputs():
    return [torch.randn(batch_size, dim) * 5]


def get_init_inputs():
    return []
