"""KernelBench level 1's scaled dot-product attention problem as it ships: float32 inputs from torch.rand, built
without a dtype, B32 H32 S512 D1024 (issue 16's fp32 target). `kforge eval` of generated/attention/model_new.py
against this file is the issue's acceptance check for the fp32 kernel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


batch_size = 32
num_heads = 32
sequence_length = 512
embedding_dimension = 1024


def get_inputs():
    shape = (batch_size, num_heads, sequence_length, embedding_dimension)
    return [torch.rand(shape), torch.rand(shape), torch.rand(shape)]


def get_init_inputs():
    return []
