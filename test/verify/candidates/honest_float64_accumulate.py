# The GEMM accumulated in float64 and rounded back to the input's dtype once: more precise than the reference,
# never less.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.addmm(self.gemm.bias.double(), x.double(), self.gemm.weight.double().t())
        return torch.relu(y).to(x.dtype)
