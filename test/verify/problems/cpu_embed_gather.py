"""Integer inputs: an embedding lookup by int64 indices, scaled per row by a float gate. A table of 1000 x 64."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num, dim):
        super().__init__()
        self.table = nn.Embedding(num, dim)

    def forward(self, idx, gate):
        return self.table(idx) * gate.unsqueeze(-1)


def get_inputs():
    return [torch.randint(0, 1000, (64, 24)), torch.rand(64, 24)]


def get_init_inputs():
    return [1000, 64]
