# Honest (library anchor + custom epilogue): the convolution stays cuDNN through F.conv2d (bias included);
# relu and the scale run in one custom CUDA kernel over its output — the shape of kforge's own files.
# `correct` with cuDNN disclosed; `cheating` only under --strict. GPU only (the kernel is CUDA).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void relu_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float scale, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.f) * scale;
}

torch::Tensor relu_scale(torch::Tensor x, double scale) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "relu_scale: contiguous float32 CUDA tensor expected");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int threads = 256;
  const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
  relu_scale_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), (float)scale, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
_CPP = "torch::Tensor relu_scale(torch::Tensor x, double scale);"
_ext = load_inline(name="kforge_verify_relu_scale_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["relu_scale"]) if torch.cuda.is_available() else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.scale = scale

    def forward(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1).contiguous()
        if _ext is None or not y.is_cuda or y.dtype != torch.float32:
            return torch.relu(y) * self.scale
        return _ext.relu_scale(y, float(self.scale))
