# A "custom kernel" that calls ATen's CPU GEMM directly, past the dispatcher (at::cpu::addmm, the structured
# kernel's own entry point): no dispatcher op runs, so neither the dispatch-mode record nor the profiler's op record
# sees a GEMM; custom_kernel_used sees its compiled code called.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SRC = r"""
#include <torch/extension.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/clamp_min_cpu_dispatch.h>

torch::Tensor fused_linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto y = at::cpu::addmm(b, x, w.t());
  return at::cpu::clamp_min(y, 0);
}
"""

_ext = load_inline(name="rt15_native_gemm", cpp_sources=[_SRC], functions=["fused_linear_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.fused_linear_relu(x, self.gemm.weight, self.gemm.bias)
