# Red team round 17: adv_fault_lazy_output against a clock that reads one byte of every output page before it
# stops. The output's pages stay inaccessible for good: every read faults; the SIGSEGV handler computes only the
# 64-byte line the faulting load reads (16 outputs), opens the page, and sets the trap flag so that the CPU stops
# after that one instruction; the SIGTRAP handler closes the page again. A read of one byte per page computes one
# line per page inside the timed region; a comparison that reads every element computes every line, outside it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <sys/mman.h>
#include <signal.h>
#include <ucontext.h>
#include <pthread.h>
#include <unistd.h>
#include <cstring>
#include <vector>
#include <algorithm>

struct Lazy {
  char* base; size_t len; float* x; int64_t B, K, N; torch::Tensor w, b; std::vector<unsigned char> line_done;
};
static std::vector<Lazy*>* g_lazy = nullptr;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_old_segv, g_old_trap;
static bool g_installed = false;
static size_t g_page = 4096;
static __thread char* t_open[4];
static __thread int t_nopen = 0;

static void fill_line(Lazy* L, size_t line) {
  float* out = reinterpret_cast<float*>(L->base);
  const float* w = L->w.data_ptr<float>();
  const float* b = L->b.data_ptr<float>();
  int64_t total = L->B * L->N;
  for (int64_t e = (int64_t)line * 16; e < std::min<int64_t>(total, (int64_t)line * 16 + 16); ++e) {
    int64_t i = e / L->N, n = e % L->N;
    const float* xi = L->x + i * L->K; const float* wn = w + n * L->K;
    float acc = 0.f;
    for (int64_t k = 0; k < L->K; ++k) acc += xi[k] * wn[k];
    out[e] = acc + b[n];
  }
}

static void chain(struct sigaction& old, int sig, siginfo_t* si, void* uc) {
  if (old.sa_flags & SA_SIGINFO) { old.sa_sigaction(sig, si, uc); return; }
  if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) { old.sa_handler(sig); return; }
  signal(sig, SIG_DFL); raise(sig);
}

static void on_segv(int sig, siginfo_t* si, void* ucv) {
  char* a = reinterpret_cast<char*>(si->si_addr);
  pthread_mutex_lock(&g_mu);
  Lazy* hit = nullptr;
  if (g_lazy) for (Lazy* L : *g_lazy) if (a >= L->base && a < L->base + L->len) { hit = L; break; }
  if (!hit) { pthread_mutex_unlock(&g_mu); chain(g_old_segv, sig, si, ucv); return; }
  char* page = (char*)((uintptr_t)a & ~(uintptr_t)(g_page - 1));
  mprotect(page, g_page, PROT_READ | PROT_WRITE);
  size_t first = (size_t)(page - hit->base) / 64;   // the lines of this page a load may read: the one hit and the next
  size_t line = (size_t)(a - hit->base) / 64;
  for (size_t l = line; l < std::min(line + 2, hit->line_done.size()); ++l)
    if (!hit->line_done[l]) { fill_line(hit, l); hit->line_done[l] = 1; }
  (void)first;
  if (t_nopen < 4) t_open[t_nopen++] = page;
  pthread_mutex_unlock(&g_mu);
  ucontext_t* uc = (ucontext_t*)ucv;
  uc->uc_mcontext.gregs[REG_EFL] |= 0x100;  // trap after the faulting instruction
}

static void on_trap(int sig, siginfo_t* si, void* ucv) {
  if (t_nopen == 0) { chain(g_old_trap, sig, si, ucv); return; }
  for (int i = 0; i < t_nopen; ++i) mprotect(t_open[i], g_page, PROT_NONE);
  t_nopen = 0;
  ucontext_t* uc = (ucontext_t*)ucv;
  uc->uc_mcontext.gregs[REG_EFL] &= ~0x100;
}

static void install() {
  if (g_installed) return;
  g_page = sysconf(_SC_PAGESIZE);
  g_lazy = new std::vector<Lazy*>();
  struct sigaction sa; memset(&sa, 0, sizeof(sa));
  sa.sa_flags = SA_SIGINFO | SA_NODEFER; sigemptyset(&sa.sa_mask);
  sa.sa_sigaction = on_segv; sigaction(SIGSEGV, &sa, &g_old_segv);
  sa.sa_sigaction = on_trap; sigaction(SIGTRAP, &sa, &g_old_trap);
  g_installed = true;
}

torch::Tensor linear_lazy(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat && x.dim() == 2, "x");
  install();
  int64_t B = x.size(0), K = x.size(1), N = w.size(0);
  size_t bytes = (size_t)(B * N * sizeof(float));
  size_t len = std::max<size_t>(g_page, (bytes + g_page - 1) / g_page * g_page);
  void* base = mmap(nullptr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(base != MAP_FAILED, "mmap");
  Lazy* L = new Lazy();
  L->base = (char*)base; L->len = len; L->B = B; L->K = K; L->N = N; L->w = w; L->b = b;
  L->line_done.assign((bytes + 63) / 64, 0);
  L->x = (float*)malloc(sizeof(float) * B * K);
  memcpy(L->x, x.data_ptr<float>(), sizeof(float) * B * K);
  pthread_mutex_lock(&g_mu); g_lazy->push_back(L); pthread_mutex_unlock(&g_mu);
  auto deleter = [L](void*) {
    pthread_mutex_lock(&g_mu);
    g_lazy->erase(std::remove(g_lazy->begin(), g_lazy->end(), L), g_lazy->end());
    pthread_mutex_unlock(&g_mu);
    munmap(L->base, L->len); free(L->x); delete L;
  };
  return torch::from_blob(base, {B, N}, deleter, torch::TensorOptions().dtype(torch::kFloat));
}
"""
_ext = load_inline(name="kforge_rt17_fault_stepped", cpp_sources=_SOURCE, functions=["linear_lazy"],
                   extra_cflags=["-O3", "-march=native"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self._key = None
        self._snap = None

    def forward(self, x):
        w, b = self.gemm.weight, self.gemm.bias
        key = (w.data_ptr(), w._version, b.data_ptr(), b._version)
        if key != self._key:
            self._snap = (w.detach().float().contiguous().clone(), b.detach().float().contiguous().clone())
            self._key = key
        return _ext.linear_lazy(x.detach().float().contiguous(), *self._snap)
