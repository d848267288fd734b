// Shared device helpers of the Linear -> BatchNorm1d -> scale -> softmax recipe.
// Include guard (not #pragma once): kforge emit inlines this header into every .cu that includes it,
// and load_inline concatenates those sources into one translation unit.
#ifndef KFORGE_LINEAR_BN_SOFTMAX_COMMON_CUH
#define KFORGE_LINEAR_BN_SOFTMAX_COMMON_CUH

#include <cstdint>
#include <cuda_runtime.h>

namespace lbs {

// Column statistics: a thread owns one column of a 128-row tile, read as 4 register blocks of 32
// rows (32 loads in flight; an exact two-pass mean / M2 per block, merged with Chan's formula), and
// writes one partial per tile: at batch 1024 the finalize kernel then merges only 8 partials.
constexpr int kStatsRowsPerBlock = 32;
constexpr int kStatsBlocksPerTile = 4;
constexpr int kStatsRowsPerTile = kStatsRowsPerBlock * kStatsBlocksPerTile;
constexpr int kStatsThreads = 256;

// Rows of the statistics tile that starts at row0 (the last tile may be short).
__host__ __device__ __forceinline__ int64_t rows_in_tile(int64_t rows_total, int64_t row0) {
  return rows_total - row0 < kStatsRowsPerTile ? rows_total - row0 : kStatsRowsPerTile;
}

// Row pass: one CTA per row; a thread caches kSoftmaxVecsPerThread float4s of its row.
constexpr int kSoftmaxThreads = 256;
constexpr int kSoftmaxVecsPerThread = 8;
constexpr int kSoftmaxCachedCols = kSoftmaxThreads * kSoftmaxVecsPerThread * 4;  // 8192

constexpr int kSplitThreads = 256;
constexpr int kFinalizeThreads = 64;  // per-column kernels: 128 CTAs at N = 8192

// fp32 -> tf32 with round-to-nearest, ties away (what cvt.rna does). The result is an fp32 value whose
// low 13 mantissa bits are zero, so the tensor cores read it without any further rounding, whatever
// conversion (truncation or rounding) cuBLAS applies to its fp32 inputs.
__device__ __forceinline__ float round_to_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t bits;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(x));
  return __uint_as_float(bits & 0xffffe000u);
#else
  // Same rounding by integer arithmetic for pre-Ampere compiles (the host refuses to run there:
  // cuBLAS has no TF32 path before sm_80); inf/nan pass through unchanged.
  uint32_t bits = __float_as_uint(x);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;
  return __uint_as_float((bits + 0x1000u) & 0xffffe000u);
#endif
}

__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

}  // namespace lbs

#endif  // KFORGE_LINEAR_BN_SOFTMAX_COMMON_CUH
