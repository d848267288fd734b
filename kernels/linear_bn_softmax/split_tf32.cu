// 3xTF32 operand split, written in the K-interleaved layout that lets one GEMM per K-chunk form all
// three products. v = big + small with big = tf32(v) and small = tf32(v - big); v - big is exact in
// fp32 (big is within half a tf32 ulp of v), so the pair keeps ~22 mantissa bits and the product
// drops only small*small'.
//
// Layout (row r of a rows x k operand -> row r of a rows x 3k output). K is cut into chunks of
// `chunk` columns (the last may be shorter, length len); chunk c starting at k0 becomes three
// consecutive segments of len columns at output column 3*k0:
//   A side (x):  [ small | big   | big ]
//   B side (W):  [ big   | small | big ]
// so a GEMM over the 3*len columns of one chunk sums small*big + big*small + big*big, the two small
// products first: the tensor cores' truncating accumulator then only loses bits of the big product's
// len steps, which the chunk length bounds (host.cu adds the chunks in fp32 through beta = 1).
#include "common.cuh"

namespace lbs {

// grid.x covers the columns (in float4 units when kVec4), grid.y strides over rows. kVec4 needs
// k % 4 == 0, chunk % 4 == 0 and 16-byte aligned pointers (host-checked): a float4 then never
// straddles a chunk boundary and every destination float4 is aligned.
template <bool kVec4>
__global__ void __launch_bounds__(kSplitThreads)
split_tf32_interleaved_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t rows, int k,
                              int chunk, bool a_side) {
  constexpr int kWidth = kVec4 ? 4 : 1;
  const int col = (blockIdx.x * kSplitThreads + threadIdx.x) * kWidth;
  if (col >= k) return;
  const int k0 = (col / chunk) * chunk;
  const int len = min(chunk, k - k0);
  const int j = col - k0;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float* in = src + r * k + col;
    float* out = dst + r * 3 * static_cast<int64_t>(k) + 3 * static_cast<int64_t>(k0) + j;
    if constexpr (kVec4) {
      const float4 v = __ldcs(reinterpret_cast<const float4*>(in));  // streamed: read exactly once
      float4 b, s;
      b.x = round_to_tf32(v.x); s.x = round_to_tf32(v.x - b.x);
      b.y = round_to_tf32(v.y); s.y = round_to_tf32(v.y - b.y);
      b.z = round_to_tf32(v.z); s.z = round_to_tf32(v.z - b.z);
      b.w = round_to_tf32(v.w); s.w = round_to_tf32(v.w - b.w);
      *reinterpret_cast<float4*>(out) = a_side ? s : b;
      *reinterpret_cast<float4*>(out + len) = a_side ? b : s;
      *reinterpret_cast<float4*>(out + 2 * len) = b;
    } else {
      const float v = *in;
      const float b = round_to_tf32(v);
      const float s = round_to_tf32(v - b);
      out[0] = a_side ? s : b;
      out[len] = a_side ? b : s;
      out[2 * len] = b;
    }
  }
}

}  // namespace lbs
