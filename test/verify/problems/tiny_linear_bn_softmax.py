"""Tiny Linear → BatchNorm1d → scale → Softmax (the seed problem's structure at CPU size), training mode."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.gemm(x)
        x = self.bn(x)
        x = self.scale * x
        return self.softmax(x)


def get_inputs():
    return [torch.rand(64, 128)]


def get_init_inputs():
    return [128, 256, 1e-5, 0.1, (1,)]
