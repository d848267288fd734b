"""Depthwise 3x3 Conv2d then ReLU6 (hardtanh 0..6), fp16 weights and input: a MobileNet block.

64 x 192 x 112 x 112 fp16 (154 M elements). The depthwise conv is memory-bound; torch.compile is known to
lose to cuDNN here, so the library call is the one to keep.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, channels, kernel_size):
        super().__init__()
        self.depthwise = nn.Conv2d(
            channels, channels, kernel_size, padding=kernel_size // 2, groups=channels, dtype=torch.float16
        )

    def forward(self, x):
        return F.relu6(self.depthwise(x))


batch_size = 64
channels = 192
height = width = 112
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=torch.float16)]


def get_init_inputs():
    return [channels, kernel_size]
