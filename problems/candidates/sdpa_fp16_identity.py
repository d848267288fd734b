"""Honest identity candidate for problems/sdpa_fp16.py: the very same PyTorch op.

Not an optimisation: it exists to validate kforge's timing, which must report a speedup near 1.0
(within [0.9, 1.1]) for two implementations that do identical work.
"""

import torch
import torch.nn as nn

# Declares a PyTorch baseline: kforge discloses that it runs the reference operator instead of flagging it.
KFORGE_BASELINE = True


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)
