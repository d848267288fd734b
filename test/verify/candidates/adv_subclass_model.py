# Pattern 17 (subclassing Model): a copy of the reference with ModelNew inheriting its forward.
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.gemm(x))


class ModelNew(Model):
    pass
