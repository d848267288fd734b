"""tiny_linear_relu under a name of its own: the problem adv_problem_pyc_forge forges a bytecode cache for (a copy,
so that a forged cache left on disk by a run of the verifier from before round 8 never stands in for a problem other
entries use)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.gemm(x))


def get_inputs():
    return [torch.rand(48, 96)]


def get_init_inputs():
    return [96, 64]
