"""Binary cross-entropy on logits (nn.BCEWithLogitsLoss, mean reduction): multi-label classification's loss.

16384 x 8192 fp32 logits and {0, 1} targets (1.07 GB together) reduced to a scalar.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, logits, targets):
        return self.loss(logits, targets)


batch_size = 16384
num_labels = 8192


def get_inputs():
    return [torch.randn(batch_size, num_labels) * 3, torch.randint(0, 2, (batch_size, num_labels)).float()]


def get_init_inputs():
    return []
