# Honest, in another layout: the GEMM computed as (out_features, batch) and returned as its transposed view.
# Right values, non-contiguous: output_type says so (warn) and the verdict stays correct.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.gemm.bias[:, None], self.gemm.weight, x.t()).t()
