# Red team round 17: the worker's clock slowed down while the forward runs. clock_gettime's slot in every loaded
# object's GOT (libpython's perf_counter calls it through its PLT) is pointed at a wrapper that subtracts 80% of
# each forward's duration from every CLOCK_MONOTONIC reading after it. The Python function objects the harness
# bound (time.perf_counter) are untouched; the reference's own process keeps a true clock.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

_SOURCE = r"""
#include <torch/extension.h>
#include <link.h>
#include <elf.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <cstring>
#include <cstdint>

typedef int (*cg_t)(clockid_t, struct timespec*);
static cg_t g_real = nullptr;
static int64_t g_discount = 0;   // ns taken off every monotonic reading
static int64_t g_t0 = 0;

static int64_t raw_now() { struct timespec ts; g_real(CLOCK_MONOTONIC, &ts); return ts.tv_sec * 1000000000LL + ts.tv_nsec; }

static int fake_clock_gettime(clockid_t c, struct timespec* ts) {
  int r = g_real(c, ts);
  if (r == 0 && (c == CLOCK_MONOTONIC || c == CLOCK_MONOTONIC_RAW) && g_discount) {
    int64_t t = ts->tv_sec * 1000000000LL + ts->tv_nsec - g_discount;
    ts->tv_sec = t / 1000000000LL; ts->tv_nsec = t % 1000000000LL;
  }
  return r;
}

static int patch_one(struct dl_phdr_info* info, size_t, void*) {
  const ElfW(Dyn)* dyn = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn)*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym)* symtab = nullptr; const char* strtab = nullptr;
  const ElfW(Rela)* tabs[2] = {nullptr, nullptr}; size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = (const ElfW(Sym)*)d->d_un.d_ptr; break;
      case DT_STRTAB: strtab = (const char*)d->d_un.d_ptr; break;
      case DT_JMPREL: tabs[0] = (const ElfW(Rela)*)d->d_un.d_ptr; break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_RELA: tabs[1] = (const ElfW(Rela)*)d->d_un.d_ptr; break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
    }
  }
  if (!symtab || !strtab) return 0;
  // Some loaders leave these unrelocated (the vdso): skip addresses below the object's base.
  if ((uintptr_t)symtab < info->dlpi_addr || (uintptr_t)strtab < info->dlpi_addr) return 0;
  size_t page = sysconf(_SC_PAGESIZE);
  for (int t = 0; t < 2; ++t) {
    if (!tabs[t] || (uintptr_t)tabs[t] < info->dlpi_addr) continue;
    for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = tabs[t][i];
      unsigned type = ELF64_R_TYPE(r.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const char* name = strtab + symtab[ELF64_R_SYM(r.r_info)].st_name;
      if (strcmp(name, "clock_gettime") != 0) continue;
      void** slot = (void**)(info->dlpi_addr + r.r_offset);
      if (!g_real) g_real = (cg_t)*slot;
      if (*slot == (void*)fake_clock_gettime) continue;
      uintptr_t p0 = (uintptr_t)slot & ~(page - 1);
      mprotect((void*)p0, page, PROT_READ | PROT_WRITE);
      *slot = (void*)fake_clock_gettime;
    }
  }
  return 0;
}

int64_t arm() { g_real = (cg_t)&clock_gettime; dl_iterate_phdr(patch_one, nullptr); return 0; }
int64_t begin() { g_t0 = raw_now(); return 0; }
int64_t finish() { g_discount += (raw_now() - g_t0) * 4 / 5; return 0; }
"""
_ext = load_inline(name="kforge_rt17_clock_got", cpp_sources=_SOURCE, functions=["arm", "begin", "finish"],
                   verbose=False)
_ext.arm()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)

    def forward(self, x):
        _ext.begin()
        y = F.linear(x, self.gemm.weight, self.gemm.bias)
        _ext.finish()
        return y
