"""relu(Linear(x)) * alpha, alpha given with the inputs."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x, alpha):
        return torch.relu(self.gemm(x)) * alpha


def get_inputs():
    return [torch.rand(48, 96), 2.5]


def get_init_inputs():
    return [96, 64]
