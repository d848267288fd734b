"""Attention scores: batched Q K^T (3-D torch.bmm), scaled by 1/sqrt(d), softmax over keys.

192 (batch x heads) x 1000 queries x 1000 keys, head dim 80, fp32: the 768 MB score tensor is written,
re-read for the scale and again for the softmax in eager PyTorch.
"""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k):
        scores = torch.bmm(q, k.transpose(1, 2))
        scores = scores * self.scale
        return torch.softmax(scores, dim=-1)


batch_heads = 192
seq_len = 1000
head_dim = 80


def get_inputs():
    return [torch.randn(batch_heads, seq_len, head_dim), torch.randn(batch_heads, seq_len, head_dim)]


def get_init_inputs():
    return [head_dim]
