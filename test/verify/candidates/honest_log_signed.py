# Honest: the same log (NaN where the input is negative, as the reference), computed by a C++ loop.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor log2x(torch::Tensor x) {
  auto src = x.contiguous();
  auto out = torch::empty_like(src);
  const float* s = src.data_ptr<float>();
  float* d = out.data_ptr<float>();
  for (int64_t i = 0; i < src.numel(); ++i) d[i] = std::log(s[i]) * 2.0f;
  return out;
}
"""
_ext = load_inline(name="kforge_rt_log2x", cpp_sources=_SOURCE, functions=["log2x"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.log2x(x)
