// 3xTF32 operand split: src = big + small with big = tf32(src) and small = tf32(src - big).
// src - big is exact in fp32 (big is within half a tf32 ulp of src), so the pair keeps ~22 mantissa
// bits; the GEMMs then form big*big' + big*small' + small*big' and drop only small*small'.
#include "common.cuh"

namespace lbs {

// Memory-bound: one read and two writes per element; float4 accesses when the host has checked
// that n is a multiple of 4 and all three pointers are 16-byte aligned.
template <bool kVec4>
__global__ void __launch_bounds__(kSplitThreads)
split_tf32_kernel(const float* __restrict__ src, float* __restrict__ big, float* __restrict__ small,
                  int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kVec4) {
    const int64_t n4 = n / 4;
    const float4* src4 = reinterpret_cast<const float4*>(src);
    float4* big4 = reinterpret_cast<float4*>(big);
    float4* small4 = reinterpret_cast<float4*>(small);
    for (; i < n4; i += stride) {
      const float4 v = __ldcs(src4 + i);  // streamed: read exactly once
      float4 b, s;
      b.x = round_to_tf32(v.x); s.x = round_to_tf32(v.x - b.x);
      b.y = round_to_tf32(v.y); s.y = round_to_tf32(v.y - b.y);
      b.z = round_to_tf32(v.z); s.z = round_to_tf32(v.z - b.z);
      b.w = round_to_tf32(v.w); s.w = round_to_tf32(v.w - b.w);
      big4[i] = b;
      small4[i] = s;
    }
  } else {
    for (; i < n; i += stride) {
      const float v = src[i];
      const float b = round_to_tf32(v);
      big[i] = b;
      small[i] = round_to_tf32(v - b);
    }
  }
}

}  // namespace lbs
