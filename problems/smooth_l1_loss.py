"""Smooth L1 (Huber-style) loss with beta=0.5 (nn.SmoothL1Loss, mean reduction).

16384 x 8193 fp32, two inputs reduced to a scalar; differences fall on both sides of beta.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, beta):
        super().__init__()
        self.loss = nn.SmoothL1Loss(beta=beta)

    def forward(self, predictions, targets):
        return self.loss(predictions, targets)


batch_size = 16384
dim = 8193
beta = 0.5


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [beta]
