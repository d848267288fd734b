# A "kernel" whose grid covers two images: the batch loop is baked in (a common LLM slip). Right at the
# benchmark's batch of 2 and below, zeros for every image past the second.
import torch
import torch.nn as nn

GRID = 2


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        out = torch.zeros_like(x)
        for n in range(min(GRID, x.shape[0])):
            out[n] = torch.softmax(x[n] * self.scale, dim=-1)
        return out
