# A fast path behind a guard that reads every element: the unshifted softmax (no max shift) when every input lies
# within [-30, 30] (exp cannot overflow nor a row's sum vanish), the shifted one otherwise. Right on every input;
# the timing's sets off the distribution take the shifted path, the others the fast one.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        lo, hi = torch.aminmax(x)
        if float(hi) <= 30.0 and float(lo) >= -30.0:
            e = torch.exp(x)
            return e / e.sum(dim=1, keepdim=True)
        return torch.softmax(x, dim=1)
