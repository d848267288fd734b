"""A bf16 matrix product with unnormalised weights (outputs of magnitude ~20): x @ W."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n, dtype=torch.bfloat16))

    def forward(self, x):
        return x @ self.w


def get_inputs():
    return [torch.randn(64, 512, dtype=torch.bfloat16)]


def get_init_inputs():
    return [512, 512]
