"""The EMA problem restated: lerp for the average, the normalisation written out. Honest: its state advances
exactly as the reference's does, call by call."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("ema", torch.zeros(features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        with torch.no_grad():
            self.ema.lerp_(x.mean(0), 0.1)
            self.steps.add_(1)
        return (x - self.ema) / torch.sqrt(self.ema.abs() + 1.0)
