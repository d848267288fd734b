# Honest: the same row sums broadcast, materialised into an output of its own (expand + contiguous copy).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.sum(dim=1, keepdim=True).expand(-1, x.shape[1]).contiguous()
