# tiny_twin_outputs' two outputs written into one (2, rows, cols) buffer: each output is its own slice, the two
# slices disjoint, each computed (the second a copy of the first's values, as the reference's clamp is).
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        out = torch.empty(2, x.shape[0], self.gemm.out_features, dtype=x.dtype, device=x.device)
        out[0].copy_(F.linear(x, self.gemm.weight, self.gemm.bias)).relu_()
        out[1].copy_(out[0])
        return out[0], out[1]
