"""Cross entropy of logits against int64 class targets (F.cross_entropy, mean reduction).

65536 x 1999 fp32 logits, 65536 int64 targets from torch.randint: a row log-softmax, a gather, a mean.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets)


batch_size = 65536
num_classes = 1999


def get_inputs():
    return [torch.randn(batch_size, num_classes) * 3, torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
