// kf_running_stats.cuh — BatchNorm's running statistics, updated on the device from the batch statistics a
// normalisation's statistics kernels wrote, in one launch. As PyTorch's training-mode batch norm does:
//   factor = momentum, or 1 / num_batches_tracked after its increment when momentum is None (cumulative);
//   running_mean = (1 - factor) * running_mean + factor * mean
//   running_var  = (1 - factor) * running_var  + factor * M2 / max(count - 1, 1)      (the unbiased variance)
//   num_batches_tracked += 1
// Done with PyTorch ops this was six small kernels and their host time per call; at launch-bound sizes (ResNet
// blocks, small batches) that cost more than the fused normalisation saved.
//
// ---------------------------------------------------------------------------------------------- contract
//   cudaError_t kf_launch_running_stats(stats, channels, mean, var, elem, batches, cumulative, momentum, count,
//                                       stream)
//   stats     float[channels][3] {mean, M2, count} (kf_launch_normalize's stats_out), device memory
//   mean/var  `channels` contiguous elements each, of type elem (KfStatElem: float, __half, __nv_bfloat16)
//   batches   int64 counter (num_batches_tracked), nullable (then no increment; not cumulative)
//   cumulative  momentum is None: the factor is 1 / the counter after its increment (needs `batches`)
//   count     elements each statistic was taken over
//   Returns cudaErrorInvalidValue for a bad argument, else the launch's error. One block: the counter is read
//   by every thread before one thread writes it.
#pragma once
#include "kf_common.cuh"

enum KfStatElem : int { kKfStatF32 = 0, kKfStatF16 = 1, kKfStatBF16 = 2 };

template <typename T>
__global__ void __launch_bounds__(256) kf_running_stats_kernel(const float* __restrict__ stats, int64_t channels,
                                                               T* mean, T* var, int64_t* batches, bool cumulative,
                                                               float momentum, float count) {
  const int64_t seen = batches != nullptr ? batches[0] : 0;
  __syncthreads();
  if (batches != nullptr && threadIdx.x == 0) batches[0] = seen + 1;
  const float factor = cumulative ? 1.f / static_cast<float>(seen + 1) : momentum;
  const float keep = 1.f - factor;
  const float denom = fmaxf(count - 1.f, 1.f);
  for (int64_t k = threadIdx.x; k < channels; k += blockDim.x) {
    const float m = stats[3 * k];
    const float v = stats[3 * k + 1] / denom;
    mean[k] = kf_from_float<T>(factor * m + keep * kf_to_float<T>(mean[k]));
    var[k] = kf_from_float<T>(factor * v + keep * kf_to_float<T>(var[k]));
  }
}

// Not inline: the host unit (.cpp) calls it, so the .cu unit must emit it.
cudaError_t kf_launch_running_stats(const float* stats, int64_t channels, void* mean, void* var, int elem,
                                    int64_t* batches, bool cumulative, float momentum, float count, cudaStream_t stream) {
  if (channels <= 0 || stats == nullptr || mean == nullptr || var == nullptr) return cudaErrorInvalidValue;
  if (cumulative && batches == nullptr) return cudaErrorInvalidValue;
  const unsigned threads = channels >= 256 ? 256u : static_cast<unsigned>((channels + 31) / 32 * 32);
  switch (elem) {
    case kKfStatF32:
      kf_running_stats_kernel<float><<<1, threads, 0, stream>>>(stats, channels, static_cast<float*>(mean),
                                                                static_cast<float*>(var), batches, cumulative, momentum, count);
      break;
    case kKfStatF16:
      kf_running_stats_kernel<__half><<<1, threads, 0, stream>>>(stats, channels, static_cast<__half*>(mean),
                                                                 static_cast<__half*>(var), batches, cumulative, momentum, count);
      break;
    case kKfStatBF16:
      kf_running_stats_kernel<__nv_bfloat16><<<1, threads, 0, stream>>>(
          stats, channels, static_cast<__nv_bfloat16*>(mean), static_cast<__nv_bfloat16*>(var), batches, cumulative,
          momentum, count);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
