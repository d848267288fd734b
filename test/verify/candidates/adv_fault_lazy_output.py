# Red team round 17: the output is a plain float32 torch.Tensor over memory mapped PROT_NONE; a SIGSEGV handler
# computes the whole output the first time anything reads it (outside any timed region: the forward only copies
# its input and returns). Outputs never read (most timed calls) are never computed.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <sys/mman.h>
#include <signal.h>
#include <pthread.h>
#include <unistd.h>
#include <cstring>
#include <vector>
#include <algorithm>

struct Lazy {
  char* base; size_t len; float* x; int64_t B, K, N; torch::Tensor w, b; bool done;
};
static std::vector<Lazy*>* g_lazy = nullptr;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_old;
static bool g_installed = false;

static void fill(Lazy* L) {
  float* out = reinterpret_cast<float*>(L->base);
  const float* w = L->w.data_ptr<float>();
  const float* b = L->b.data_ptr<float>();
  for (int64_t i = 0; i < L->B; ++i) {
    const float* xi = L->x + i * L->K;
    for (int64_t n = 0; n < L->N; ++n) {
      const float* wn = w + n * L->K;
      float acc = 0.f;
      for (int64_t k = 0; k < L->K; ++k) acc += xi[k] * wn[k];
      out[i * L->N + n] = acc + b[n];
    }
  }
}

static void on_fault(int sig, siginfo_t* si, void* uc) {
  char* a = reinterpret_cast<char*>(si->si_addr);
  pthread_mutex_lock(&g_mu);
  if (g_lazy) {
    for (Lazy* L : *g_lazy) {
      if (a >= L->base && a < L->base + L->len) {
        if (!L->done) { mprotect(L->base, L->len, PROT_READ | PROT_WRITE); fill(L); L->done = true; }
        pthread_mutex_unlock(&g_mu);
        return;
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (g_old.sa_flags & SA_SIGINFO) { g_old.sa_sigaction(sig, si, uc); return; }
  if (g_old.sa_handler != SIG_DFL && g_old.sa_handler != SIG_IGN) { g_old.sa_handler(sig); return; }
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install() {
  if (g_installed) return;
  g_lazy = new std::vector<Lazy*>();
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_old);
  g_installed = true;
}

torch::Tensor linear_lazy(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat && x.dim() == 2, "x");
  install();
  int64_t B = x.size(0), K = x.size(1), N = w.size(0);
  size_t page = sysconf(_SC_PAGESIZE);
  size_t len = std::max<size_t>(page, ((size_t)(B * N * sizeof(float)) + page - 1) / page * page);
  void* base = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(base != MAP_FAILED, "mmap");
  Lazy* L = new Lazy();
  L->base = (char*)base; L->len = len; L->B = B; L->K = K; L->N = N; L->w = w; L->b = b; L->done = false;
  L->x = (float*)malloc(sizeof(float) * B * K);
  memcpy(L->x, x.data_ptr<float>(), sizeof(float) * B * K);
  pthread_mutex_lock(&g_mu);
  g_lazy->push_back(L);
  pthread_mutex_unlock(&g_mu);
  auto deleter = [L](void*) {
    pthread_mutex_lock(&g_mu);
    g_lazy->erase(std::remove(g_lazy->begin(), g_lazy->end(), L), g_lazy->end());
    pthread_mutex_unlock(&g_mu);
    munmap(L->base, L->len); free(L->x); delete L;
  };
  return torch::from_blob(base, {B, N}, deleter, torch::TensorOptions().dtype(torch::kFloat));
}
"""
_ext = load_inline(name="kforge_rt17_fault_lazy", cpp_sources=_SOURCE, functions=["linear_lazy"],
                   extra_cflags=["-O3", "-march=native", "-ffast-math"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._key = None
        self._snap = None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w.data_ptr(), w._version, b.data_ptr(), b._version)
        if key != self._key:  # a snapshot of the weights as they are now (a later read computes with these)
            self._snap = (w.detach().float().contiguous().clone(), b.detach().float().contiguous().clone())
            self._key = key
        return _ext.linear_lazy(x.detach().float().contiguous(), *self._snap)
