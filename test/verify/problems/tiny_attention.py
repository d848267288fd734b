"""Tiny attention problem for the verification corpus: the seed problem's structure at CPU size.

Like problems/sdpa_fp16.py, the inputs are torch.rand, which makes attention nearly uniform: a candidate
that skips QKᵀ and the softmax passes the fp16-style tolerance (1e-2). That is the point of this problem.
"""

import torch
import torch.nn as nn

KFORGE_ATOL = 1e-2
KFORGE_RTOL = 1e-2


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q, K, V):
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def get_inputs():
    shape = (1, 2, 1024, 32)
    return [torch.rand(shape), torch.rand(shape), torch.rand(shape)]


def get_init_inputs():
    return []
