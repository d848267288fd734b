# Round 10 (honest): the input made contiguous first, then read by its pointer as contiguous (what a kernel on
# x.contiguous().data_ptr() does): right for any layout a caller passes.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        flat = torch.as_strided(x, x.shape, (x.shape[1], 1), x.storage_offset())
        return torch.relu(torch.addmm(self.gemm.bias, flat, self.gemm.weight.t()))
