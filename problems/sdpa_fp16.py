"""Scaled dot-product attention in fp16 with a large head dim (KernelBench format).

B=32, H=32, S=512, D=1024: PyTorch's flash and cuDNN backends refuse head dims above 256, so it falls
back to the memory-efficient kernel. 1.1 TFLOP per call; Q, K, V and O are 1 GiB each.
"""

import torch
import torch.nn as nn

batch_size = 32
num_heads = 32
sequence_length = 512
head_dim = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(Q, K, V)


def get_inputs():
    shape = (batch_size, num_heads, sequence_length, head_dim)
    Q = torch.rand(shape, dtype=torch.float16, device="cuda")
    K = torch.rand(shape, dtype=torch.float16, device="cuda")
    V = torch.rand(shape, dtype=torch.float16, device="cuda")
    return [Q, K, V]


def get_init_inputs():
    return []
