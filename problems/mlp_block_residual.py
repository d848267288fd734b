"""A transformer MLP block: x + fc2(gelu(fc1(x))), 1024 -> 4096 -> 1024.

8 x 512 x 1024 fp32 tokens (68 GFLOP in two GEMMs); the GELU and the residual add are the epilogues.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden, mlp_hidden):
        super().__init__()
        self.fc1 = nn.Linear(hidden, mlp_hidden)
        self.fc2 = nn.Linear(mlp_hidden, hidden)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x)))


batch_size = 8
tokens = 512
hidden = 1024
mlp_hidden = 4096


def get_inputs():
    return [torch.randn(batch_size, tokens, hidden)]


def get_init_inputs():
    return [hidden, mlp_hidden]
