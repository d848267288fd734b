"""Softmax over 16384 columns: every output is ~6e-5, under KernelBench's fp32 atol of 1e-4, so an
all-zeros answer passes the default tolerance. kforge must notice, tighten it, and say so."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(8, 16384)]


def get_init_inputs():
    return []
