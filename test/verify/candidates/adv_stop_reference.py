# Red team round 4 (2026-11-25).
# A native thread started lazily by a forward once the calls pile up as in a timing loop (after every thread
# baseline) freezes the clean reference process with SIGSTOP/SIGCONT from C++ (no audited Python call, no
# signal import): the reference's timed calls take longer by the stopped fraction, while the thread itself
# sleeps (almost no CPU, so nothing is "stolen"). The candidate itself is F.linear: every output is right.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>
#include <string>
#include <fstream>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

namespace {
std::atomic<bool> started{false};
std::atomic<long> calls{0};
std::vector<int> children() {
  std::vector<int> out;
  int me = getpid();
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    int pid = atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/stat");
    std::string s; std::getline(f, s);
    auto r = s.rfind(')');
    if (r == std::string::npos) continue;
    char state; int ppid;
    if (sscanf(s.c_str() + r + 2, "%c %d", &state, &ppid) == 2 && ppid == me) out.push_back(pid);
  }
  closedir(d);
  return out;
}
void freezer() {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);  // a bounded nuisance
  while (std::chrono::steady_clock::now() < until) {
    auto kids = children();
    for (int i = 0; i < 50; ++i) {
      for (int p : kids) kill(p, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::microseconds(600));
      for (int p : kids) kill(p, SIGCONT);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  }
}
}  // namespace

void enter() {
  if (++calls > 80 && !started.exchange(true)) std::thread(freezer).detach();
}
"""
_ext = load_inline(name="kforge_rt4_freezer", cpp_sources=_SOURCE, functions=["enter"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        _ext.enter()
        return torch.relu(F.linear(x, self.gemm.weight, self.gemm.bias))
