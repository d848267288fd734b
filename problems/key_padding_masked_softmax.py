"""Attention probabilities with a key-padding mask: scores.masked_fill(mask[:, None, None, :], -inf).softmax(-1).

32 x 16 x 512 x 512 fp32 scores and a (batch, keys) bool mask, True where a key is padding (about a fifth of
them): the mask is an input, broadcast over heads and queries, so a fused kernel reads it as a narrow
(1-byte) operand beside the fp32 rows.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, scores, key_padding_mask):
        masked = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        return torch.softmax(masked, dim=-1)


batch_size = 32
num_heads = 16
seq_len = 512


def get_inputs():
    scores = torch.randn(batch_size, num_heads, seq_len, seq_len)
    key_padding_mask = torch.rand(batch_size, seq_len) < 0.2
    return [scores, key_padding_mask]


def get_init_inputs():
    return []
