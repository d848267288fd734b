# An honest GEMM written into a fresh buffer padded to a multiple of 16 columns (an aligned store width), returned
# as the slice of the real columns: a non-contiguous view whose storage is larger than the output.
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        n = self.gemm.out_features
        padded = torch.empty(x.shape[0], (n + 16) // 16 * 16 + 16, dtype=x.dtype, device=x.device)
        torch.addmm(self.gemm.bias, x, self.gemm.weight.t(), out=padded[:, :n])
        return torch.relu_(padded[:, :n])
