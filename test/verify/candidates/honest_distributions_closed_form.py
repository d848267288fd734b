# Honest (false-flag sweep, 2026-11-30): the Normal's log-density and the Categorical's entropy in closed form.
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.loc = nn.Linear(features, features)

    def forward(self, x):
        z = (x - self.loc(x)) / 0.5
        log_prob = (-0.5 * z * z - math.log(0.5) - 0.5 * math.log(2 * math.pi)).sum(-1)
        logp = torch.log_softmax(x, dim=-1)
        return log_prob - (logp.exp() * logp).sum(-1)
