"""Causal-masked softmax of attention scores, with a shape assert that torch.fx cannot trace.

16 x 16 x 1000 x 1000 fp32 scores; a (max_len, max_len) lower-triangular buffer is sliced to the actual
length, taken from the input's shape as a Python int. The assert on a shape makes fx's symbolic_trace fail
(control flow on a traced value), yet the model is ordinary and runs eagerly.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, max_len):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, scores):
        T = scores.size(-1)
        assert T <= self.max_len, f"sequence length {T} exceeds max_len {self.max_len}"
        scores = scores.masked_fill(~self.mask[:T, :T], float("-inf"))
        return torch.softmax(scores, dim=-1)


batch_size = 16
num_heads = 16
seq_len = 1000
max_len = 1024


def get_inputs():
    return [torch.randn(batch_size, num_heads, seq_len, seq_len)]


def get_init_inputs():
    return [max_len]
