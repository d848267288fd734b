# Honest: the per-row count as count_nonzero over the comparison (an int64 result, exact like the reference's).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, threshold):
        super().__init__()
        self.threshold = threshold

    def forward(self, x):
        return torch.count_nonzero(x > self.threshold, dim=1)
