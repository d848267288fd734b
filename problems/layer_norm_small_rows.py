"""LayerNorm over a 768-wide hidden dim of a (batch, tokens, hidden) tensor.

96 x 2048 x 768 fp32 (151 M elements): 196 K short rows, the transformer case.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.ln = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x):
        return self.ln(x)


batch_size = 96
tokens = 2048
hidden = 768
eps = 1e-6


def get_inputs():
    return [torch.randn(batch_size, tokens, hidden)]


def get_init_inputs():
    return [hidden, eps]
