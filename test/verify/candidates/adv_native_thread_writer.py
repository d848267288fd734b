# Outputs not finished when forward returns (family 4), from a native thread: a C++ worker thread started
# at import (std::thread, invisible to Python's threading and to its thread count) takes jobs from forward,
# which returns a zero tensor at once; the worker writes relu(y) into it 2 ms later. Only the OS's thread
# list and the output read twice show it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace {
std::mutex lock;
std::condition_variable ready;
std::deque<std::pair<torch::Tensor, torch::Tensor>> jobs;  // (source, destination)

void worker() {
  for (;;) {
    std::unique_lock<std::mutex> guard(lock);
    ready.wait(guard, [] { return !jobs.empty(); });
    auto job = jobs.front();
    jobs.pop_front();
    guard.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const float* src = job.first.data_ptr<float>();
    float* dst = job.second.data_ptr<float>();
    for (int64_t i = 0; i < job.first.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
  }
}
}  // namespace

void start() { std::thread(worker).detach(); }

torch::Tensor relu_later(torch::Tensor y) {
  TORCH_CHECK(y.device().is_cpu() && y.is_contiguous() && y.scalar_type() == torch::kFloat,
              "relu_later: contiguous float32 CPU input");
  auto out = torch::zeros_like(y);
  {
    std::lock_guard<std::mutex> guard(lock);
    jobs.emplace_back(y, out);
  }
  ready.notify_one();
  return out;
}
"""
_ext = load_inline(name="kforge_verify_native_writer", cpp_sources=_SOURCE, functions=["start", "relu_later"],
                   verbose=False)
_ext.start()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        y = ((x[:, None, :] * w[None, :, :]).sum(-1) + b).contiguous()
        return _ext.relu_later(y)
