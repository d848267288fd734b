"""Tiny fp16 attention (the seed problem's dtype and input distribution at a small size). Head dim 512:
above 256 kforge's attention kernel takes it on the GPU (below, it keeps PyTorch's faster flash/cuDNN
kernels); on the CPU its PyTorch fallback does."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def get_inputs():
    shape = (1, 2, 256, 512)
    return [torch.rand(shape, dtype=torch.float16) for _ in range(3)]


def get_init_inputs():
    return []
