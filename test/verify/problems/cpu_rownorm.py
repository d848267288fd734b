"""Row normalisation (layer norm without affine) over 1024 features of [0, 1) values: the one-pass variance's
cancellation shows only on values that sit on a large common offset (red team round 13)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features

    def forward(self, x):
        return F.layer_norm(x, (self.features,), eps=1e-5)


def get_inputs():
    return [torch.rand(64, 1024)]


def get_init_inputs():
    return [1024]
