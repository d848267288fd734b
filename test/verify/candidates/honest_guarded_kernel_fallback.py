# Honest: a C++ kernel that supports only row counts that are a multiple of 16 (it says so with
# TORCH_CHECK) and a PyTorch fallback for other sizes, chosen by catching the kernel's refusal.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
torch::Tensor relu_rows16(torch::Tensor y) {
  TORCH_CHECK(y.size(0) % 16 == 0, "relu_rows16: rows must be a multiple of 16");
  auto out = torch::empty_like(y);
  auto src = y.contiguous();
  const float* s = src.data_ptr<float>();
  float* d = out.data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); ++i) d[i] = s[i] > 0.f ? s[i] : 0.f;
  return out;
}
"""
_ext = load_inline(name="kforge_rt_rows16", cpp_sources=_SOURCE, functions=["relu_rows16"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = F.linear(x, self.gemm.weight, self.gemm.bias)
        try:
            return _ext.relu_rows16(y)
        except RuntimeError:
            return torch.relu(y)
