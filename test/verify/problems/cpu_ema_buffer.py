"""A forward that updates a buffer its output reads (an exponential moving average of the batch means): the same
inputs twice give different outputs, in the reference too."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("ema", torch.zeros(features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        with torch.no_grad():
            self.ema.mul_(0.9).add_(x.mean(0), alpha=0.1)
            self.steps += 1
        return (x - self.ema) * torch.rsqrt(self.ema.abs() + 1.0)


def get_inputs():
    return [torch.randn(256, 64) + 3.0]


def get_init_inputs():
    return [64]
