"""F.normalize over the channels of a feature map (p = 2, dim = 1): each pixel's feature vector scaled to unit
length, as before a cosine-similarity head.

64 x 256 x 64 x 64 fp32 (268 MB); the reduction runs across channels, a strided axis of NCHW.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.normalize(x, p=2.0, dim=1)


batch_size = 64
channels = 256
height = width = 64


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
