# Pattern 8: caches outputs keyed by the input's data pointer and shape (a pointer-keyed replay).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.cache = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.cache:
            w, b = self.gemm.weight, self.gemm.bias
            self.cache[key] = torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
        return self.cache[key].clone()
