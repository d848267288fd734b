# Pattern 22: installs packages at run time (here a harmless stand-in command, so the test needs no network).
import subprocess
import sys

import torch
import torch.nn as nn

subprocess.run([sys.executable, "-c", "print('pip install fast-kernels')"], check=False, capture_output=True)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
