# A "custom kernel" that is ATen's own GEMM: a C++ operator registered with TORCH_LIBRARY (reached through
# torch.ops, no Python module) whose body calls at::addmm and at::relu. torch hands a dispatcher op to the op
# recorder and pops the recorder while its kernel runs, so the at::addmm inside was never recorded: --strict
# read "no PyTorch gemm op executed" and custom_kernel_used "the forward called its compiled code".
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <torch/library.h>

torch::Tensor fused_linear_relu(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return at::relu(at::addmm(b, x, w.t()));
}

TORCH_LIBRARY(rt15_adv_cpp, m) {
  m.def("linear_relu(Tensor x, Tensor w, Tensor b) -> Tensor");
}
TORCH_LIBRARY_IMPL(rt15_adv_cpp, CompositeExplicitAutograd, m) {
  m.impl("linear_relu", &fused_linear_relu);
}
"""

load_inline(name="rt15_adv_cpp_op", cpp_sources=[_SRC], is_python_module=False, verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.ops.rt15_adv_cpp.linear_relu(x, self.gemm.weight, self.gemm.bias)
