# Red team round 16: wrong only in rows whose inputs are tiny (RMS below 0.015): those rows' answers are halved.
# get_inputs() never has such rows; the off-distribution "rows apart" sets do (scales 1e-2..1e2). In a timed pair off
# the distribution, the far-off rows were judged against float64 with the reference's median row error as a floor —
# the rounding of rows 10^4 times larger — and forgiven.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n, dtype=torch.bfloat16))

    def forward(self, x):
        y = x @ self.w
        rms = x.float().pow(2).mean(1).sqrt()
        return torch.where((rms < 0.015).unsqueeze(1), y * 0.5, y)
