# Honest: the gather through the indices it is given.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, idx):
        return torch.index_select(x, 1, idx).mul_(self.scale)
