"""Honest identity candidate for problems/gemm_bn_scale_softmax.py: the same PyTorch ops.

Same attribute names (gemm, bn, scale, softmax) so kforge syncs parameters through state_dict. It exists
to validate the timing: the speedup must come out within [0.9, 1.1].
"""

import torch
import torch.nn as nn

# Declares a PyTorch baseline: kforge discloses that it runs the reference operator instead of flagging it.
KFORGE_BASELINE = True


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.scale * self.bn(self.gemm(x)))
