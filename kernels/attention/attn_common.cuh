// Shared device helpers for the attention kernels: element types, cp.async with zero fill,
// the 128-byte shared-memory swizzle both kernels use, and the legacy mma.sync fragment ops.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace kforge_attn {

// Problem description shared by every kernel. Strides are in elements; the head dim is contiguous
// (stride 1), which the host checks. Dqk is Q/K's head dim, Dv is V's (SDPA allows them to differ).
struct AttnParams {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int64_t q_sb, q_sh, q_ss;
  int64_t k_sb, k_sh, k_ss;
  int64_t v_sb, v_sh, v_ss;
  int64_t o_sb, o_sh, o_ss;
  int B, H, Sq, Sk, Dqk, Dv;
  float scale_log2;  // softmax scale * log2(e): the kernels work in base 2 (exp2 is one MUFU op)
  int causal;        // top-left aligned mask (key j visible to query i iff j <= i), as SDPA's is_causal
  int kv_group;      // query heads per K/V head (grouped-query attention; 1 without): head h reads K/V head h / kv_group
  // Optional (the shared-memory-P kernels and the split register-P kernel): each row's log2-sum-exp2 of its scaled scores, m + log2(l), -inf for a row that sees
  // no key, at lse[b * lse_sb + h * lse_sh + row]. Key chunks of a long row are merged with it (attn_chunked.cu).
  float* lse;
  int lse_sb, lse_sh;  // a chunked call keeps its scratch far below 2^31 floats
};

// Special registers read where they are used (volatile: not merged with an earlier read whose value the compiler
// would then keep live in a general register).
#define KFORGE_SPECIAL_REG(fn, reg)                  \
  __device__ __forceinline__ uint32_t fn() {         \
    uint32_t v;                                      \
    asm volatile("mov.u32 %0, %%" reg ";" : "=r"(v)); \
    return v;                                        \
  }
KFORGE_SPECIAL_REG(special_reg_tid_x, "tid.x")
KFORGE_SPECIAL_REG(special_reg_ctaid_x, "ctaid.x")
KFORGE_SPECIAL_REG(special_reg_ctaid_y, "ctaid.y")
KFORGE_SPECIAL_REG(special_reg_ctaid_z, "ctaid.z")
#undef KFORGE_SPECIAL_REG

// Stores one row's log2-sum-exp2 when the caller asked for it (p.lse): max m (log2 units of scaled scores) and
// sum l of exp2(s - m) over the row's visible keys.
__device__ __forceinline__ void store_row_lse(const AttnParams& p, int b, int h, int row, float m, float l) {
  if (p.lse != nullptr && row < p.Sq) p.lse[b * p.lse_sb + h * p.lse_sh + row] = l > 0.f ? m + __log2f(l) : -INFINITY;
}

// The same where the tile's indices are not at hand: rows g and g + 8 of thread tid's warp in a CTA of 64-row
// warpgroups, tile `tile` of the launch (the grid's x), head and batch from the grid's y and z.
__device__ __forceinline__ void store_row_lse_here(const AttnParams& p, int tile_rows, int tile, int r, float m, float l) {
  const uint32_t tid = special_reg_tid_x();
  const int row = tile * tile_rows + (int)(tid / 128) * 64 + (int)(tid % 128) / 32 * 16 + (int)(tid % 32) / 4 + 8 * r;
  store_row_lse(p, (int)special_reg_ctaid_z(), (int)special_reg_ctaid_y(), row, m, l);
}

constexpr float kLog2e = 1.4426950408889634f;

template <typename T> struct Pack2;
template <> struct Pack2<__half> {
  static __device__ __forceinline__ uint32_t from_floats(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <> struct Pack2<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t from_floats(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

// 2^x in one MUFU op; results below 2^-126 flush to 0 (exp2f adds a range fix-up: 3 more instructions per
// element, on the softmax's critical path). Softmax weights that small vanish in any 16-bit P anyway.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Softmax front half for one m64n256 block of S held by this thread (rows g and g + 8 of its warp, element
// 4 jn + e at row g + 8 (e >> 1), key key_t + 8 jn + (e & 1), key_t = the block's first key + 2t): S to log2
// units in place, keys >= key_end and (causal) keys after the row set to -inf, and each row's max over the
// block (reduced over the quad that shares the row).
__device__ __forceinline__ void scale_mask_rowmax(float* acc, float scale_log2, bool need_mask, int key_t, int key_end,
                                                  bool causal, int row, float (&mx)[2]) {
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int jn = 0; jn < 32; ++jn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float x = __fmul_rn(acc[4 * jn + e], scale_log2);  // rounded: the max and exp2(x - m) see one value
      if (need_mask) {
        const int key = key_t + jn * 8 + (e & 1);
        if (key >= key_end || (causal && key > row + (e >> 1) * 8)) x = -INFINITY;
      }
      acc[4 * jn + e] = x;
      mx[e >> 1] = fmaxf(mx[e >> 1], x);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
  }
}

// The unmasked case with a positive scale (every block of the seed shape): each row's max of the raw S, in
// log2 units afterwards, with S left unscaled for exp2(S * scale - m) as one FFMA. With the mask merged in
// (scale_mask_rowmax with a run-time need_mask), ptxas if-converts the masking of all 128 elements: ~600 of the
// block's ~1900 softmax instructions become predicates and selects for a mask not in force.
template <bool kScaleInPlace = false>
__device__ __forceinline__ void rowmax_unmasked(float* acc, float scale_log2, float (&mx)[2]) {
  mx[0] = mx[1] = -INFINITY;
#pragma unroll
  for (int i = 0; i < 128; ++i) {
    if (kScaleInPlace) acc[i] = __fmul_rn(acc[i], scale_log2);  // rounded here: never contracted into exp2's FADD
    mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], acc[i]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    if (!kScaleInPlace) mx[r] = __fmul_rd(mx[r], scale_log2);  // scale > 0; rounded down for exp2_arg_ffma
  }
}

// exp2's argument for a raw score s against m, the row's max of the scaled scores rounded DOWN (rowmax_unmasked),
// as one FFMA: the product is not rounded, so at the max element it exceeds m by up to an ulp of m — nothing at
// ordinary scores, but 64 at scores of ~1e9 (inputs of ~1e4), where exp2 then overflowed the 16-bit P. Rounded down,
// m is never above the exact product at the max: clamped at 0, the max element's weight is exactly 1 and no weight
// exceeds it (scores within an ulp of the max weigh 1, as they would in fp32 arithmetic at that magnitude).
__device__ __forceinline__ float exp2_arg_ffma(float s, float scale_log2, float m) {
  return fminf(fmaf(s, scale_log2, -m), 0.f);
}

// Masking for rowmax_unmasked's callers: keys >= key_end and (causal) keys after the row set to -inf in the raw
// block (the scale, > 0, keeps them -inf). Called behind a uniform branch, only for blocks that need it.
__device__ __forceinline__ void mask_block(float* acc, int key_t, int key_end, bool causal, int row) {
#pragma unroll
  for (int i = 0; i < 128; ++i) {
    const int key = key_t + (i >> 2) * 8 + (i & 1);
    if (key >= key_end || (causal && key > row + ((i >> 1) & 1) * 8)) acc[i] = -INFINITY;
  }
}

// One online-softmax step (FlashAttention-2's) for the two rows a thread holds in an m16n8 accumulator (g and
// g + 8): mx, each row's max over this thread's scores of the block, is reduced over the quad that shares the row;
// the running max moves to the new one, the running sum l is rescaled to it, and alpha (the factor for the
// accumulated O) and m_use (the max this block's scores subtract before exp2) are returned.
__device__ __forceinline__ void online_softmax_step(float (&mx)[2], float (&m_run)[2], float (&l_run)[2],
                                                    float (&alpha)[2], float (&m_use)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float m_new = fmaxf(m_run[r], mx[r]);
    // A row with no visible key so far keeps m = -inf; subtracting 0 instead keeps exp2 at 0, not NaN.
    m_use[r] = (m_new == -INFINITY) ? 0.f : m_new;
    alpha[r] = exp2f(m_run[r] - m_use[r]);
    m_run[r] = m_new;
    l_run[r] *= alpha[r];
  }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte async copy global -> shared; when `valid` is false the 16 bytes are zero-filled
// (src-size 0), so tile edges past S or D never read out of bounds and never feed garbage
// (a NaN pattern times a zero probability is still NaN) into the MMAs.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// Rows of 64 16-bit elements (128 bytes) in 8-row atoms of 1024 bytes with the 16-byte chunk index
// XOR-ed by (row % 8): the layout wgmma calls 128B swizzle, and for ldmatrix it makes the 8 rows of
// one 8x8 matrix hit 8 different bank groups.
__device__ __forceinline__ uint32_t swz128(int row, int chunk16) {
  return static_cast<uint32_t>(row * 128 + ((chunk16 ^ (row & 7)) << 4));
}

// ---- legacy warp-level MMA (sm_80+), used by the decode kernel ----
__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

template <typename T> struct Mma16816;
template <> struct Mma16816<__half> {
  static __device__ __forceinline__ void run(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct Mma16816<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

}  // namespace kforge_attn

namespace kforge_attn {

// ---- Hopper bulk-copy (TMA) and mbarrier helpers (sm_90) ----
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
// Makes barrier initialisation visible to the async proxy and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// 4-D tiled bulk tensor load (coordinates innermost first) completing on `bar` of this CTA.
__device__ __forceinline__ void tma_load_4d(void* dst, const void* tmap, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
      "[%6];\n" ::"r"(smem_u32(dst)),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar))
      : "memory");
}

}  // namespace kforge_attn

namespace kforge_attn {
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
// Barrier among the 128 threads of one warpgroup (ids 1.. ; 0 is __syncthreads).
__device__ __forceinline__ void warpgroup_bar(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 1) : "memory");
}
// Named barrier `id` of `threads` threads: some arrive (and go on), the others wait until all arrived.
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
}  // namespace kforge_attn

namespace kforge_attn {
// ---- cluster helpers (K/V multicast between the CTAs of a cluster) ----
// Arrive on the barrier at the same shared-memory offset in CTA `cta_rank` of this cluster. Default
// (.release.cta) semantics on purpose: the arriving warp only says "my MMAs that read this slot retired";
// there are no generic-proxy writes for the peer to see. A .release.cluster arrive compiles to a cluster-
// wide memory barrier per release (45% of all warp stall cycles in a profile: half the speed); the producer's
// wait is likewise a plain CTA-scope try_wait (an acquire.cluster wait invalidates L1 on every poll).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta_rank) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(cta_rank)
      : "memory");
}
// Warpgroup-wide register reallocation (sm_90): every warp of the warpgroup executes it.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }
// Not volatile: a pure read that the compilers may repeat where used instead of holding it in a register.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// 4-D bulk tensor load delivered to the same offsets (data and barrier) in every CTA of `cta_mask`.
__device__ __forceinline__ void tma_load_4d_multicast(void* dst, const void* tmap, uint64_t* bar, int c0, int c1,
                                                      int c2, int c3, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, "
      "%3, %4, %5}], [%6], %7;\n" ::"r"(smem_u32(dst)),
      "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar)), "h"(cta_mask)
      : "memory");
}
}  // namespace kforge_attn

namespace kforge_attn {
// ---- distributed shared memory (split-key clusters: partial O and softmax statistics between CTAs) ----
// Address of the same shared-memory offset in CTA `cta_rank` of this cluster.
__device__ __forceinline__ uint32_t mapa_u32(uint32_t local, uint32_t cta_rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(cta_rank));
  return remote;
}
// Stores into a peer CTA's shared memory that complete (bytes) on a barrier in that CTA: the peer learns
// the data arrived from its own barrier wait, with no cluster-wide fence on this side.
__device__ __forceinline__ void st_async_v4(uint32_t remote, float a, float b, float c, float d, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(
                   remote),
               "f"(a), "f"(b), "f"(c), "f"(d), "r"(remote_bar)
               : "memory");
}
__device__ __forceinline__ void st_async_v2(uint32_t remote, float a, float b, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(remote),
               "f"(a), "f"(b), "r"(remote_bar)
               : "memory");
}
}  // namespace kforge_attn
