# Honest, an LLM style: the fused bias + ReLU written in C++ and registered as a dispatcher operator of its own
# namespace (TORCH_LIBRARY with a CPU kernel, is_python_module=False), reached through torch.ops; the GEMM
# stays a PyTorch matmul (disclosed by default, condemned under --strict).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <torch/library.h>

torch::Tensor bias_relu_cpu(const torch::Tensor& y, const torch::Tensor& b) {
  TORCH_CHECK(y.dim() == 2 && b.dim() == 1 && y.size(1) == b.size(0), "bias_relu: shapes");
  auto yc = y.contiguous();
  auto bc = b.contiguous();
  auto out = torch::empty_like(yc);
  const float* yp = yc.data_ptr<float>();
  const float* bp = bc.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t rows = yc.size(0), cols = yc.size(1);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      float v = yp[i * cols + j] + bp[j];
      op[i * cols + j] = v > 0.f ? v : 0.f;
    }
  return out;
}

TORCH_LIBRARY(rt15_honest_cpp, m) {
  m.def("bias_relu(Tensor y, Tensor b) -> Tensor");
}
TORCH_LIBRARY_IMPL(rt15_honest_cpp, CPU, m) {
  m.impl("bias_relu", &bias_relu_cpu);
}
"""

load_inline(name="rt15_honest_cpp_op", cpp_sources=[_SRC], is_python_module=False, verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.matmul(x, self.gemm.weight.t())
        return torch.ops.rt15_honest_cpp.bias_relu(y, self.gemm.bias)
