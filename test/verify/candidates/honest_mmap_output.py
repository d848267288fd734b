# Honest (red team round 17): the output lives in memory the extension maps itself (an anonymous mmap returned
# through from_blob with an munmap deleter, as an arena or a pinned-buffer allocator would) and is written in full
# before forward returns. The CPU clock now reads a byte of every output page before it stops: already-written
# pages cost nothing, so nothing changes for it.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cstring>
#include <algorithm>
torch::Tensor relu_into_mapping(torch::Tensor y) {
  TORCH_CHECK(y.is_contiguous() && y.scalar_type() == torch::kFloat, "contiguous float32");
  size_t page = sysconf(_SC_PAGESIZE);
  size_t bytes = (size_t)y.numel() * sizeof(float);
  size_t len = std::max<size_t>(page, (bytes + page - 1) / page * page);
  void* base = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(base != MAP_FAILED, "mmap");
  const float* src = y.data_ptr<float>();
  float* dst = (float*)base;
  for (int64_t i = 0; i < y.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
  return torch::from_blob(base, y.sizes(), [len](void* p) { munmap(p, len); },
                          torch::TensorOptions().dtype(torch::kFloat));
}
"""
_ext = load_inline(name="kforge_rt17_honest_mmap", cpp_sources=_SOURCE, functions=["relu_into_mapping"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = F.linear(x, self.gemm.weight, self.gemm.bias).contiguous()
        return _ext.relu_into_mapping(y.detach().cpu()).to(y.device)
