# Pattern 21: like a CUDA graph captured on the first call, it keeps computing from the first call's
# input buffers (stale pointers) whatever it is given later.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.static_x = None

    def forward(self, x):
        if self.static_x is None or self.static_x.shape != x.shape:
            self.static_x = x
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((self.static_x[:, None, :] * w[None]).sum(-1) + b, 0.0)
