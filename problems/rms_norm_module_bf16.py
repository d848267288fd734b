"""nn.RMSNorm over a 4096-wide hidden dim in bf16 (bf16 weight and input).

16 x 4096 x 4096 bf16 (268 M elements, 537 MB): the statistics must be accumulated in fp32.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.norm = nn.RMSNorm(hidden, eps=eps, dtype=torch.bfloat16)

    def forward(self, x):
        return self.norm(x)


batch_size = 16
tokens = 4096
hidden = 4096
eps = 1e-5


def get_inputs():
    return [torch.randn(batch_size, tokens, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden, eps]
