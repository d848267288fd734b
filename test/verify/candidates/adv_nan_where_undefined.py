# NaN tricks against a comparison that now lets a NaN match a NaN: on a problem whose reference is NaN for
# negative inputs, answer NaN everywhere (right wherever the reference is undefined, and nowhere else).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.full_like(x, float("nan"))
