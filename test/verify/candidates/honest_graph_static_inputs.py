# GPU, honest: cuDNN's convolution and a custom relu*scale kernel captured once per call signature into a CUDA
# graph over static input buffers; every call copies its input in, replays, and clones the output out. After the
# capture the forward never calls its extension from Python: only the device's record shows its kernel ran
# (custom_kernel_used must read it). The shape of a graph-replaying kforge file.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void graph_relu_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float scale, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    y[i] = fmaxf(x[i], 0.f) * scale;
}

torch::Tensor graph_relu_scale(torch::Tensor x, double scale) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.is_contiguous(),
              "graph_relu_scale: contiguous float32 CUDA tensor expected");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return y;
  const int threads = 256;
  const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 4096);
  graph_relu_scale_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), (float)scale, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
_CPP = "torch::Tensor graph_relu_scale(torch::Tensor x, double scale);"
_ext = load_inline(name="kforge_verify_graph_relu_scale", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["graph_relu_scale"]) if torch.cuda.is_available() else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.scale = scale
        self._graphs = {}

    def _planned(self, x):
        y = F.conv2d(x, self.conv.weight, self.conv.bias, padding=1).contiguous()
        return _ext.graph_relu_scale(y, float(self.scale))

    def forward(self, x):
        if (_ext is None or not x.is_cuda or x.dtype != torch.float32 or torch.is_grad_enabled()
                and (x.requires_grad or any(p.requires_grad for p in self.parameters()))):
            return torch.relu(self.conv(x)) * self.scale
        # parameters enter by address: one replaced (`.data =`, load into a new tensor) makes a new signature
        key = (tuple(x.shape), x.stride(), x.get_device(), self.conv.weight.data_ptr(), self.conv.bias.data_ptr())
        entry = self._graphs.get(key)
        if entry is None:
            static = x.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._planned(static)  # warm-up outside the capture: cuDNN's algorithm search
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=side):
                out = self._planned(static)
            if len(self._graphs) >= 4:
                self._graphs.clear()
            entry = self._graphs[key] = (graph, static, out)
        graph, static, out = entry
        static.copy_(x)
        graph.replay()
        return out.clone()
