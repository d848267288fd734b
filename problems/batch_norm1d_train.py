"""BatchNorm1d in training mode over a 2-D (batch, features) tensor.

16384 x 8190 fp32: a column reduction (each feature's statistics run down the batch), running stats updated.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_features, eps, momentum):
        super().__init__()
        self.bn = nn.BatchNorm1d(num_features, eps=eps, momentum=momentum)

    def forward(self, x):
        return self.bn(x)


batch_size = 16384
features = 8190
eps = 1e-5
momentum = 0.05


def get_inputs():
    return [torch.randn(batch_size, features) * 3 - 1]


def get_init_inputs():
    return [features, eps, momentum]
