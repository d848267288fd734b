# Pattern 11: an output buffer from torch.empty whose last row is never written (reads uninitialised memory).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        out = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
        n = x.shape[0] - 1
        out[:n] = torch.clamp_min((x[:n, None, :] * w[None]).sum(-1) + b, 0.0)
        return out
