# A native thread started lazily by a forward (not at import, so no thread baseline sees it start) spins
# whenever the candidate is not running: the reference, timed in another process on the same cores, loses a
# core; the candidate's own calls pause the spinner and run at full speed. It starts only once the calls pile
# up as in a timing loop (after 120 calls: the checks make about 80), so it is on while both sides are timed.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <atomic>
#include <chrono>
#include <thread>

namespace {
std::atomic<bool> inside{false};
std::atomic<bool> started{false};
std::atomic<long> calls{0};
volatile double sink = 0;
void spin() {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);  // a bounded nuisance in CI
  while (std::chrono::steady_clock::now() < until) {
    if (inside.load()) { std::this_thread::yield(); continue; }
    for (int i = 0; i < 100000; ++i) sink = sink * 0.999 + i;
  }
}
}  // namespace

void enter() {
  inside = true;
  if (++calls > 120 && !started.exchange(true)) std::thread(spin).detach();
}
void leave() { inside = false; }
"""
_ext = load_inline(name="kforge_rt_lazy_hog", cpp_sources=_SOURCE, functions=["enter", "leave"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        _ext.enter()
        try:
            return F.linear(x, self.gemm.weight, self.gemm.bias)
        finally:
            _ext.leave()
