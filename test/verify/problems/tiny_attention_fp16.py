"""Tiny fp16 attention (the seed problem's dtype and input distribution at a small size): the shape
kforge's attention kernel takes on the GPU, and its PyTorch fallback takes on the CPU."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def get_inputs():
    shape = (2, 4, 512, 64)
    return [torch.rand(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
