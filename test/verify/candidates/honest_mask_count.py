# The row mean as sum / n, the mask compared against it, the count as an int64 sum of the mask.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        mean = x.sum(dim=1, keepdim=True) / x.shape[1]
        above = x > mean
        return above, above.to(torch.int64).sum(dim=1)
