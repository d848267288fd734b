import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Row softmax over 4096 rows of 393216 fp32 values (6.4 GB an input)."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


