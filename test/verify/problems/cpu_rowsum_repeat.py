"""Each row's sum written over all 4096 columns of its row (256 × 4096 fp32 on the CPU): the reference's
output owns every element, and most of a call's time is writing them."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1, keepdim=True).repeat(1, x.shape[1])


def get_inputs():
    return [torch.rand(256, 4096)]


def get_init_inputs():
    return []
