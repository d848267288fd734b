# Row max by hand: values as amax, the first index holding it; returned as a plain tuple where the reference
# returns torch.return_types.max.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        values = x.amax(dim=1)
        hit = x == values[:, None]
        idx = torch.arange(x.shape[1], device=x.device).expand_as(x)
        first = torch.where(hit, idx, torch.full_like(idx, x.shape[1])).amin(dim=1)
        return values, first
