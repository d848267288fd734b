"""flex_attention called eagerly with a causal score_mod: torch compiles a wrapper of its higher-order operator with
dynamo at every call, which dynamo refuses while a dispatch mode (the harness's op recorder) is on the stack."""
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import flex_attention


def _causal(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=_causal)


def get_inputs():
    return [torch.randn(1, 2, 16, 16) for _ in range(3)]


def get_init_inputs():
    return []
