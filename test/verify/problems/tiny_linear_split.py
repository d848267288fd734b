"""One GEMM whose output is handed back as two halves (torch.chunk): the reference's two outputs are views of one
buffer. An honest candidate may do the same (round 8)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return self.gemm(x).chunk(2, dim=1)


def get_inputs():
    return [torch.rand(48, 96)]


def get_init_inputs():
    return [96, 128]
