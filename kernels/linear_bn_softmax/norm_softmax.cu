// The row pass: z = (y - shift[c]) * mult[c] + add[c]   (BatchNorm affine with the scale folded in,
// rebuilt every call by bn_train_finalize.cu / bn_eval_params.cu), then softmax over the row.
// One CTA per row, in place on Y: Y is 32 MB at the problem size and still sits in the 50 MB L2 from
// the GEMM, so this pass costs about one L2 read plus one HBM write of the output.
//   kCached: cols % 4 == 0 and cols <= kSoftmaxCachedCols - each thread keeps its slice of z in
//            registers (float4 loads), one read of y, one write.
//   generic: any width - an online max/sum pass, then a second pass that recomputes z and writes.
// The per-column vectors are re-read per row; at 96 KB they stay in L1/L2 across rows.
#include "common.cuh"

namespace lbs {

// Block-wide reduction of one float per thread; every thread gets the result. `scratch` holds one
// slot per warp; the leading barrier lets consecutive calls reuse it.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
  constexpr int kWarps = kSoftmaxThreads / 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = kMax ? warp_reduce_max(v) : warp_reduce_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < kWarps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  return kMax ? warp_reduce_max(v) : warp_reduce_sum(v);
}

template <bool kCached>
__global__ void __launch_bounds__(kSoftmaxThreads)
norm_scale_softmax_kernel(float* __restrict__ y, int64_t cols, const float* __restrict__ shift,
                          const float* __restrict__ mult, const float* __restrict__ add) {
  __shared__ float scratch[kSoftmaxThreads / 32];
  float* row = y + static_cast<int64_t>(blockIdx.x) * cols;
  const int tid = threadIdx.x;

  if constexpr (kCached) {
    const int nvec = static_cast<int>(cols / 4);
    float4* row4 = reinterpret_cast<float4*>(row);
    const float4* shift4 = reinterpret_cast<const float4*>(shift);
    const float4* mult4 = reinterpret_cast<const float4*>(mult);
    const float4* add4 = reinterpret_cast<const float4*>(add);

    float4 z[kSoftmaxVecsPerThread];
    float row_max = -INFINITY;
#pragma unroll
    for (int i = 0; i < kSoftmaxVecsPerThread; ++i) {
      const int v = i * kSoftmaxThreads + tid;
      if (v < nvec) {
        const float4 yv = row4[v];
        const float4 s = __ldg(shift4 + v), m = __ldg(mult4 + v), a = __ldg(add4 + v);
        z[i] = make_float4(fmaf(yv.x - s.x, m.x, a.x), fmaf(yv.y - s.y, m.y, a.y),
                           fmaf(yv.z - s.z, m.z, a.z), fmaf(yv.w - s.w, m.w, a.w));
        row_max = fmaxf(row_max, fmaxf(fmaxf(z[i].x, z[i].y), fmaxf(z[i].z, z[i].w)));
      } else {
        z[i] = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);  // exp -> 0, never stored
      }
    }
    row_max = block_reduce<true>(row_max, scratch);

    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kSoftmaxVecsPerThread; ++i) {
      z[i].x = expf(z[i].x - row_max);
      z[i].y = expf(z[i].y - row_max);
      z[i].z = expf(z[i].z - row_max);
      z[i].w = expf(z[i].w - row_max);
      sum += (z[i].x + z[i].y) + (z[i].z + z[i].w);
    }
    const float inv_sum = 1.0f / block_reduce<false>(sum, scratch);

#pragma unroll
    for (int i = 0; i < kSoftmaxVecsPerThread; ++i) {
      const int v = i * kSoftmaxThreads + tid;
      if (v < nvec) {
        row4[v] = make_float4(z[i].x * inv_sum, z[i].y * inv_sum, z[i].z * inv_sum, z[i].w * inv_sum);
      }
    }
  } else {
    // Online softmax statistics: running max and the sum of exp relative to it.
    float run_max = -INFINITY, run_sum = 0.0f;
    for (int64_t c = tid; c < cols; c += kSoftmaxThreads) {
      const float z = fmaf(row[c] - __ldg(shift + c), __ldg(mult + c), __ldg(add + c));
      if (z > run_max) {
        run_sum = run_sum * expf(run_max - z) + 1.0f;
        run_max = z;
      } else {
        run_sum += expf(z - run_max);
      }
    }
    const float row_max = block_reduce<true>(run_max, scratch);
    // A thread with no columns has run_sum == 0 (and run_max == -inf): contribute 0, not 0 * nan;
    // a NaN in run_sum still propagates to the whole row, as in torch.softmax.
    const float mine = run_sum == 0.0f ? 0.0f : run_sum * expf(run_max - row_max);
    const float inv_sum = 1.0f / block_reduce<false>(mine, scratch);
    for (int64_t c = tid; c < cols; c += kSoftmaxThreads) {
      const float z = fmaf(row[c] - __ldg(shift + c), __ldg(mult + c), __ldg(add + c));
      row[c] = expf(z - row_max) * inv_sum;
    }
  }
}

}  // namespace lbs
