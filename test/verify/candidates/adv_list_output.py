# Round 11: the right tensor wrapped in a one-element list where the reference returns a tensor.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return [torch.relu(torch.addmm(self.gemm.bias, x, self.gemm.weight.t()))]
