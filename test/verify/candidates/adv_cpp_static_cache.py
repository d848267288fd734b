# Pattern 7/8 (a cache below Python): a C++ static map keyed on the input's address, switched on only once
# an address keeps coming back every few calls — what a timing loop over a few input sets looks like, and
# what a check feeding fresh tensors never does. Nothing in Python state shows the cache.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <unordered_map>

struct Seen { int64_t last = 0; int streak = 0; torch::Tensor out; };
static std::unordered_map<const void*, Seen> seen;
static int64_t calls = 0;

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  ++calls;
  Seen& s = seen[x.data_ptr()];
  s.streak = (calls - s.last <= 4) ? s.streak + 1 : 1;
  s.last = calls;
  if (s.streak > 7 && s.out.defined() && s.out.size(0) == x.size(0)) return s.out.clone();
  auto out = torch::relu(torch::addmm(b, x, w.t()));
  s.out = out;
  return out;
}
"""
_ext = load_inline(name="kforge_verify_static_cache", cpp_sources=_SOURCE, functions=["linear_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_relu(x.contiguous(), self.gemm.weight, self.gemm.bias)
