# Round 11 (honest): constants built under float64 as the default dtype, set and put back inside forward
# (try/finally), the GEMM in float32: no state of the caller's thread is left changed.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        previous = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            zero = torch.zeros((), device=x.device)
        finally:
            torch.set_default_dtype(previous)
        out = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        return torch.maximum(out, zero.to(out.dtype))
