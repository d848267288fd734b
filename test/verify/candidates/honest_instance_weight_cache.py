# Round 10 (honest): the transposed weight cached on the instance itself, keyed on the versions of weight and bias:
# two instances never share it, and every write to the weights refreshes it.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._wt = None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w._version, b._version, w.data_ptr(), b.data_ptr())
        if self._wt is None or self._wt[0] != key:
            self._wt = (key, w.detach().t().contiguous(), b.detach().clone())
        _, wt, bias = self._wt
        return torch.relu(torch.addmm(bias, x, wt))
