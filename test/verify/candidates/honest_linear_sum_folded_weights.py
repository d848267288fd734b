"""Honest: sum_j (x . w_j + b_j) = x . (sum_j w_j) + sum_j b_j — the same function with one matrix-vector product
instead of a matrix product, the weights summed at every call (so new weights are followed). Rounded otherwise than
the reference: in a row whose sum nearly cancels, far off it in relative terms, yet as close to float64."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        w = self.linear.weight.sum(0)
        return (torch.mv(x, w) + self.linear.bias.sum()).unsqueeze(1)
