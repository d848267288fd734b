# Row softmax written out (max shift, exp, sum) for any batch.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        z = x * self.scale
        z = z - z.amax(dim=-1, keepdim=True)
        e = torch.exp(z)
        return e / e.sum(dim=-1, keepdim=True)
