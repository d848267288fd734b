"""Tiny GEMM problem whose activation comes from a sibling module imported the ordinary way (the bytecode cache of
that module is read by every process that loads the problem; red team round 9). Its own copy, so that a cache forged
by an older verifier's run stands in for no problem other entries use."""

import torch.nn as nn

import tiny_relu_helper


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return tiny_relu_helper.activate(self.gemm(x))


def get_inputs():
    return [tiny_relu_helper.torch.rand(48, 96)]


def get_init_inputs():
    return [96, 64]
