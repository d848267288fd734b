// Per-CTA timeline for diagnosis (compiled only with -DKFORGE_TIMELINE=<max CTAs>; the shipped kernels record
// nothing): the SM a CTA ran on and the global-timer nanoseconds of its start and of its last consumer warp's
// end, so a script can see waves, the gaps between one CTA and the next on an SM, and the last wave's tail
// (bench/attention/timeline.py reads it back).
#pragma once
#include <stdint.h>

namespace kforge_attn {

#ifdef KFORGE_TIMELINE
struct CtaSpan {
  unsigned long long start, end;
  uint32_t smid, cta;
};
__device__ CtaSpan g_kforge_timeline[KFORGE_TIMELINE];
constexpr int kTimelineMarks = 24;  // per consumer warpgroup
__device__ unsigned long long g_kforge_marks[KFORGE_TIMELINE][2][kTimelineMarks];

__device__ __forceinline__ unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ uint32_t linear_cta() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
// Called by one thread as the CTA starts.
__device__ __forceinline__ void timeline_start() {
  const uint32_t cta = linear_cta();
  if (cta >= KFORGE_TIMELINE) return;
  uint32_t smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  g_kforge_timeline[cta].start = global_timer_ns();
  g_kforge_timeline[cta].smid = smid;
  g_kforge_timeline[cta].cta = cta;
}
// Called by every consumer warp (one lane) once it is done: the CTA ends with the last of them.
__device__ __forceinline__ void timeline_end() {
  const uint32_t cta = linear_cta();
  if (cta < KFORGE_TIMELINE) atomicMax(&g_kforge_timeline[cta].end, global_timer_ns());
}
// Called by all threads of a consumer warpgroup; its first thread records the time once `dep` (a register the
// event produced: an accumulator after its MMAs retired, a packed P value) is available. ptxas schedules a
// timer read like any instruction without inputs: without the predicate on `dep` it hoisted the read above
// the wgmma wait, and a mark said "MMAs retired" when they had only been issued. All in one asm statement, so
// that nothing it computes stays live in the kernel's registers (the consumers sit at their register limit,
// and a C++ version made ptxas spill).
__device__ __forceinline__ void timeline_mark(int wg, int mark, uint32_t dep) {
  asm volatile(
      "{\n"
      ".reg .u32 tx, bx, by, bz, nx, ny, lin;\n"
      ".reg .u64 t, addr;\n"
      ".reg .pred skip, after;\n"
      "mov.u32 tx, %%tid.x;\n"
      "and.b32 tx, tx, 127;\n"
      "setp.ne.u32 skip, tx, 0;\n"
      "@skip bra MARK_DONE_%=;\n"
      "mov.u32 bx, %%ctaid.x;\n"
      "mov.u32 by, %%ctaid.y;\n"
      "mov.u32 bz, %%ctaid.z;\n"
      "mov.u32 nx, %%nctaid.x;\n"
      "mov.u32 ny, %%nctaid.y;\n"
      "mad.lo.u32 lin, bz, ny, by;\n"
      "mad.lo.u32 lin, lin, nx, bx;\n"
      "setp.ge.u32 skip, lin, %3;\n"
      "@skip bra MARK_DONE_%=;\n"
      "mad.lo.u32 lin, lin, 2, %1;\n"
      "mad.lo.u32 lin, lin, %4, %2;\n"
      "mul.wide.u32 addr, lin, 8;\n"
      "add.u64 addr, addr, %0;\n"
      "setp.ne.u32 after, %5, 0x7FC0DEAD;\n"
      "mov.u64 t, 0;\n"
      "@after mov.u64 t, %%globaltimer;\n"
      "st.global.u64 [addr], t;\n"
      "MARK_DONE_%=:\n"
      "}\n" ::"l"(&g_kforge_marks[0][0][0]),
      "r"(wg), "r"(mark), "n"(KFORGE_TIMELINE), "n"(kTimelineMarks), "r"(dep)
      : "memory");
}
#else
__device__ __forceinline__ void timeline_start() {}
__device__ __forceinline__ void timeline_end() {}
__device__ __forceinline__ void timeline_mark(int, int, uint32_t) {}
#endif

}  // namespace kforge_attn
