# Honest: a tuning switch set in the environment only while its own forward runs, and put back (or removed)
# before it returns. The process's environment is the same before and after every call.
import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        previous = os.environ.get("MY_KERNEL_ROW_TILE")
        os.environ["MY_KERNEL_ROW_TILE"] = "16"
        try:
            tile = int(os.environ["MY_KERNEL_ROW_TILE"])
            w, b = self.gemm.weight, self.gemm.bias
            parts = [torch.clamp_min((x[i : i + tile, None, :] * w[None]).sum(-1) + b, 0.0)
                     for i in range(0, x.shape[0], tile)]
            return torch.cat(parts)
        finally:
            if previous is None:
                del os.environ["MY_KERNEL_ROW_TILE"]
            else:
                os.environ["MY_KERNEL_ROW_TILE"] = previous
