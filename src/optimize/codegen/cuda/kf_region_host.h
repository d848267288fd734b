// Host-side helpers every generated region function uses (the .cpp unit, torch headers): input checks
// with one-line messages, runtime scalars, and the stream/device plumbing.
#pragma once
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <string>
#include <vector>
#include "kf_types.h"
#include "kf_host.h"

#define KF_MAX_INPUTS 16

// Messages are assembled from std::string pieces only: on the device host, ostream insertion of numbers
// into a TORCH_CHECK message crashed the process.
inline void kf_check_inputs(const std::vector<at::Tensor>& in, size_t expected, const char* name) {
  TORCH_CHECK(in.size() == expected, std::string(name) + ": expected " + std::to_string(expected) +
                                         " tensors, got " + std::to_string(in.size()));
  TORCH_CHECK(expected <= KF_MAX_INPUTS, std::string(name) + ": too many inputs");
  for (size_t k = 0; k < in.size(); ++k) {
    TORCH_CHECK(in[k].is_cuda(), std::string(name) + ": input " + std::to_string(k) + " is not a CUDA tensor");
    TORCH_CHECK(in[k].device() == in[0].device(),
                std::string(name) + ": input " + std::to_string(k) + " is on another device than input 0");
    TORCH_CHECK(in[k].dim() <= KF_MAX_DIMS, std::string(name) + ": input " + std::to_string(k) + " has rank " +
                                                std::to_string(in[k].dim()) + " > " + std::to_string(KF_MAX_DIMS));
  }
}

inline KfScalars kf_scalars(const std::vector<double>& sc) {
  TORCH_CHECK(sc.size() <= KF_MAX_SCALARS, "too many runtime scalars: " + std::to_string(sc.size()));
  KfScalars out{};
  for (size_t i = 0; i < sc.size(); ++i) out.v[i] = static_cast<float>(sc[i]);
  return out;
}

// kf_running_stats.cuh's launcher, defined in the .cu unit of files with a batch-norm region.
cudaError_t kf_launch_running_stats(const float* stats, int64_t channels, void* mean, void* var, int elem,
                                    int64_t* batches, bool cumulative, float momentum, float count,
                                    cudaStream_t stream);

// BatchNorm's running statistics from the batch statistics `stats` ({mean, M2, count} per channel), on the
// device in one launch. False, with nothing changed, where these buffers are not what the kernel covers (other
// dtypes, devices or layouts): the caller then updates them with PyTorch's ops. cumulative: momentum is None.
inline bool kf_running_stats(const at::Tensor& stats, const at::Tensor& mean, const at::Tensor& var,
                             const at::Tensor& batches, bool cumulative, double momentum, double count,
                             const char* name) {
  const int64_t channels = mean.numel();
  const auto st = mean.scalar_type();
  const int elem = st == at::kFloat ? 0 : st == at::kHalf ? 1 : st == at::kBFloat16 ? 2 : -1;
  const bool covered = elem >= 0 && var.scalar_type() == st && stats.scalar_type() == at::kFloat &&
                       batches.scalar_type() == at::kLong && stats.is_cuda() && mean.device() == stats.device() &&
                       var.device() == stats.device() && batches.device() == stats.device() &&
                       stats.is_contiguous() && mean.is_contiguous() && var.is_contiguous() && channels > 0 &&
                       var.numel() == channels && batches.numel() == 1 && stats.numel() == 3 * channels;
  if (!covered) return false;
  const c10::cuda::CUDAGuard guard(stats.device());
  kf_check_cuda(kf_launch_running_stats(stats.data_ptr<float>(), channels, mean.data_ptr(), var.data_ptr(), elem,
                                        batches.data_ptr<int64_t>(), cumulative, static_cast<float>(momentum),
                                        static_cast<float>(count), at::cuda::getCurrentCUDAStream()),
                name);
  return true;
}
