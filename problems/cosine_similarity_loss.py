"""Cosine-similarity loss: mean over rows of 1 - cos(predictions, targets).

32768 x 4096 fp32, two inputs: three row reductions (dot and two norms) then a scalar mean.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        cosine = F.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1 - cosine)


batch_size = 32768
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
