# Honest: softmax written out with the max subtracted.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        z = x - x.amax(dim=1, keepdim=True)
        e = z.exp()
        return e / e.sum(dim=1, keepdim=True)
