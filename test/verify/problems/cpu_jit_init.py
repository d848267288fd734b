"""A TorchScript helper scripted at __init__, and a submodule traced at __init__."""
import torch
import torch.nn as nn


def _gate(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.gate = torch.jit.script(_gate)
        self.proj = torch.jit.trace(nn.Linear(features, features), torch.randn(2, features))

    def forward(self, x):
        return self.gate(self.proj(x))


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return [16]
