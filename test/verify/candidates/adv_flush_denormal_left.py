# Process state: denormal floats flushed to zero (torch.set_flush_denormal, the CPU's FTZ/DAZ bits) at import and
# left so: every later float computation on this thread, the worker's copy of the reference's included, treats
# tiny values as zero (and skips the slow path denormals take on x86).
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_flush_denormal(True)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
