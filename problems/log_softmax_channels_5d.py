"""Log-softmax over dim 1 (21 classes) of a 5-D NCDHW tensor, as in volumetric segmentation.

16 x 21 x 48 x 96 x 96 fp32 (149 M elements): short strided rows, many of them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.log_softmax(x, dim=1)


batch_size = 16
num_classes = 21
depth = 48
height = 96
width = 96


def get_inputs():
    return [torch.randn(batch_size, num_classes, depth, height, width)]


def get_init_inputs():
    return []
