# Pattern 3 (views filled later): every call returns a view of one buffer the module keeps and rewrites,
# so an earlier result changes under the caller (and a lazy fill can land after the check).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.scratch = None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        n = x.shape[0]
        if self.scratch is None or self.scratch.shape[0] < n:
            self.scratch = torch.empty(4 * n, w.shape[0])
        out = self.scratch[:n]
        out.copy_(torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0))
        return out
