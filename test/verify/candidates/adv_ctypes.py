# Pattern 22: reaches native libraries through ctypes (the way a candidate calls the CUDA driver directly).
import ctypes

import torch
import torch.nn as nn

_libc = ctypes.CDLL(None)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        _libc.getpid()
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
