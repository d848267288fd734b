# Honest (issue 15): the reference's forward, copied (the identity) — eager flex_attention in the candidate too.
"""flex_attention called eagerly with a causal score_mod."""
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import flex_attention


def _causal(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v):
        return flex_attention(q, k, v, score_mod=_causal)
