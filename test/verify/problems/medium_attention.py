"""Attention at a size where the GPU lags the host (GPU entries only): ~0.5 ms of work per call, so work left
queued on a side stream when forward returns is still running when the caller's stream resumes. The tiny
problems finish each kernel before the host has queued the next one, which hides an unjoined stream."""

import torch
import torch.nn as nn

KFORGE_ATOL = 1e-3
KFORGE_RTOL = 1e-3


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def get_inputs():
    shape = (4, 8, 1024, 64)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
