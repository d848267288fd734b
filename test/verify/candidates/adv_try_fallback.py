# Pattern 18: a custom kernel that fails to build, swallowed by try/except, with the reference op as the
# fallback.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
torch::Tensor fused_linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  return this_does_not_compile(x, w, b);
}
"""
try:
    _ext = load_inline(name="kforge_verify_broken", cpp_sources=_SOURCE, functions=["fused_linear_relu"])
except Exception:
    _ext = None


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        if _ext is not None:
            return _ext.fused_linear_relu(x, self.gemm.weight, self.gemm.bias)
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
