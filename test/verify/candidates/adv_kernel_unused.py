# Pattern 16: compiles a custom kernel (same source as honest_cpp_relu) and never calls it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
torch::Tensor relu_out(torch::Tensor x) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous() && x.scalar_type() == torch::kFloat,
              "relu_out: contiguous float32 CPU input");
  auto y = torch::empty_like(x);
  const float* src = x.data_ptr<float>();
  float* dst = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
  return y;
}
"""
_ext = load_inline(name="kforge_verify_relu_cpu", cpp_sources=_SOURCE, functions=["relu_out"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.ext = _ext

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        return torch.clamp_min((x[:, None, :] * w[None]).sum(-1) + b, 0.0)
