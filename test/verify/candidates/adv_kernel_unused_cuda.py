# Pattern 16 (GPU): a CUDA attention "kernel" is compiled but the forward calls the PyTorch operator.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
__global__ void kforge_verify_attention_kernel(const float* q, float* o, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) o[i] = q[i];
}
torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  TORCH_CHECK(false, "attention_forward: this head dim is not supported yet");
  return q;
}
"""
_CPP = "torch::Tensor attention_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v);"
_ext = load_inline(name="kforge_verify_attention_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["attention_forward"]) if torch.cuda.is_available() else None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = _ext

    def forward(self, Q, K, V):
        return F.scaled_dot_product_attention(Q, K, V)
