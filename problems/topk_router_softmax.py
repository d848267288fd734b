"""A mixture-of-experts router: linear gate, top-4 of 128 experts (torch.topk), softmax over the four.

32768 tokens x 2048 fp32: returns the routing weights and the int64 expert indices. topk is an op no
fused recipe is likely to cover; the gate GEMM and the tiny softmax around it remain.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden, num_experts, top_k):
        super().__init__()
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.top_k = top_k

    def forward(self, x):
        logits = self.gate(x)
        values, indices = torch.topk(logits, self.top_k, dim=-1)
        return torch.softmax(values, dim=-1), indices


tokens = 32768
hidden = 2048
num_experts = 128
top_k = 4


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden, num_experts, top_k]
