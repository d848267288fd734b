import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Attention in fp32 at KernelBench's level-1 shape (B32 H32 S512 D1024, torch.rand, built without a dtype)."""

    def __init__(self):
        super().__init__()

    def forward(self, Q: torch.Tensor, K: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(Q, K, V)


def get_inputs():
    return [torch.rand(32, 32, 512, 1024), torch.rand(32, 32, 512, 1024), torch.rand(32, 32, 512, 1024)]


def get_init_inputs():
    return []
