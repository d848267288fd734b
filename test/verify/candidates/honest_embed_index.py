# Rows gathered with index_select on the flattened indices, the gate multiplied in place on the gathered copy.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, num, dim):
        super().__init__()
        self.table = nn.Embedding(num, dim)

    def forward(self, idx, gate):
        rows = self.table.weight.index_select(0, idx.reshape(-1)).view(*idx.shape, -1)
        return rows.mul_(gate.unsqueeze(-1))
