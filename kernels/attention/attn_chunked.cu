// Merge of key chunks: attention over a key row longer than the wgmma kernels hold runs as one call per chunk
// of keys (host side: attention.cu, forward_chunked), each writing its own normalised output O_c and every row's
// log2-sum-exp2 lse_c (AttnParams::lse). The row's output is then
//   O = sum_c w_c O_c,  w_c = exp2(lse_c - M) / sum_c' exp2(lse_c' - M),  M = max_c lse_c,
// the same softmax as over the whole row, evaluated in fp32 from the chunks' 16-bit outputs.
#pragma once
#include "attn_common.cuh"

namespace kforge_attn {

constexpr int kMergeWarps = 8;  // rows per block: one warp per output row
// (At least 4 blocks per SM, not the 8 that 256-thread blocks could have: at 8, ptxas caps the kernel at 32
// registers and spills.)

// Two packed 16-bit values as floats.
template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t w);
template <> __device__ __forceinline__ float2 unpack2<__half>(uint32_t w) {
  __half2 h;
  memcpy(&h, &w, 4);
  return __half22float2(h);
}
template <> __device__ __forceinline__ float2 unpack2<__nv_bfloat16>(uint32_t w) {
  __nv_bfloat162 h;
  memcpy(&h, &w, 4);
  return __bfloat1622float2(h);
}

// Where the merged rows go: a (batch, head, row) view with its strides (in elements; head dim contiguous).
template <typename T>
struct MergeOut {
  T* ptr;
  int64_t sb, sh, ss;
  int64_t heads, seq;
};

// part_o: [n_chunks][rows][Dv] (16-bit, a chunk's rows contiguous; rows = batch x heads x seq of `out`), lse:
// [n_chunks][rows] (-inf where a chunk holds no key of the row: its part_o row was never written and is not read).
// Dv a multiple of 8 (16-byte vectors).
template <typename T>
__global__ void __launch_bounds__(kMergeWarps * 32, 4)
    attn_merge_chunks(const T* __restrict__ part_o, const float* __restrict__ lse, const MergeOut<T> out, int64_t rows,
                      int dv, int n_chunks) {
  const int lane = threadIdx.x % 32;
  const int64_t row = (int64_t)blockIdx.x * kMergeWarps + threadIdx.x / 32;
  if (row >= rows) return;
  float m = -INFINITY;
  for (int c = lane; c < n_chunks; c += 32) m = fmaxf(m, lse[c * rows + row]);
#pragma unroll
  for (int k = 16; k > 0; k >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, k));
  float sum = 0.f;
  for (int c = lane; c < n_chunks; c += 32) {
    const float x = lse[c * rows + row];
    sum += x == -INFINITY ? 0.f : exp2f(x - m);
  }
#pragma unroll
  for (int k = 16; k > 0; k >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, k);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;  // 0: a row no chunk holds a key of (not produced by the host)

  const int64_t s = row % out.seq, bh = row / out.seq;
  T* dst = out.ptr + (bh / out.heads) * out.sb + (bh % out.heads) * out.sh + s * out.ss;
  const int vecs = dv / 8;
  for (int v = lane; v < vecs; v += 32) {
    float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    for (int c = 0; c < n_chunks; ++c) {
      const float x = lse[c * rows + row];
      if (x == -INFINITY) continue;
      const float w = exp2f(x - m) * inv;
      const uint4 raw = *reinterpret_cast<const uint4*>(part_o + (c * rows + row) * dv + v * 8);
      const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 x2 = unpack2<T>(words[i]);
        acc[2 * i] = fmaf(w, x2.x, acc[2 * i]);
        acc[2 * i + 1] = fmaf(w, x2.y, acc[2 * i + 1]);
      }
    }
    *reinterpret_cast<uint4*>(dst + v * 8) =
        make_uint4(Pack2<T>::from_floats(acc[0], acc[1]), Pack2<T>::from_floats(acc[2], acc[3]),
                   Pack2<T>::from_floats(acc[4], acc[5]), Pack2<T>::from_floats(acc[6], acc[7]));
  }
}

}  // namespace kforge_attn
