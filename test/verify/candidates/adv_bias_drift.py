# State that should not exist: every call adds 1e-4 to its own bias in place (an "online calibration" nobody asked
# for). The first calls are within tolerance; the outputs drift further from the reference the longer it runs.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        with torch.no_grad():
            self.gemm.bias.add_(1e-4)
        return F.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
