// Host-side helpers every generated region function uses (the .cpp unit, torch headers): input checks
// with one-line messages, runtime scalars, and the stream/device plumbing.
// The headers are the few this unit uses, not torch/extension.h (the whole C++ frontend: about two thirds of
// the unit's compile time); the emitted file asks load_inline not to prepend it where load_inline can.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/Exceptions.h>    // torch::wrap_pybind_function, which load_inline's bindings call
#include <torch/csrc/utils/pybind.h>  // pybind11 with torch's casters (tensors, vectors of them)
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

// Whether kf_running_stats covers these buffers beside a region's tensors on `like`'s device: running mean and
// variance of `channels` contiguous float, half or bfloat16 elements, and an int64 counter — or no counter (an
// empty tensor: F.batch_norm has none) where the momentum is a number.
inline bool kf_running_stats_covers(const at::Tensor& like, const at::Tensor& mean, const at::Tensor& var,
                                    const at::Tensor& batches, bool cumulative, int64_t channels) {
  const auto st = mean.scalar_type();
  const bool counter = batches.numel() == 1 && batches.scalar_type() == at::kLong && batches.device() == like.device();
  return (st == at::kFloat || st == at::kHalf || st == at::kBFloat16) && var.scalar_type() == st &&
         (counter || (batches.numel() == 0 && !cumulative)) && like.is_cuda() && mean.device() == like.device() &&
         var.device() == like.device() && mean.is_contiguous() && var.is_contiguous() && channels > 0 &&
         mean.numel() == channels && var.numel() == channels;
}

// BatchNorm's running statistics from the batch statistics `stats` ({mean, M2, count} per channel), on the
// device in one launch. False, with nothing changed, where these buffers are not what the kernel covers (other
// dtypes, devices or layouts): the caller then updates them with PyTorch's ops. cumulative: momentum is None.
inline bool kf_running_stats(const at::Tensor& stats, const at::Tensor& mean, const at::Tensor& var,
                             const at::Tensor& batches, bool cumulative, double momentum, double count,
                             const char* name) {
  const int64_t channels = mean.numel();
  if (!kf_running_stats_covers(stats, mean, var, batches, cumulative, channels) || stats.scalar_type() != at::kFloat ||
      !stats.is_contiguous() || stats.numel() != 3 * channels)
    return false;
  const auto st = mean.scalar_type();
  const int elem = st == at::kFloat ? 0 : st == at::kHalf ? 1 : 2;
  const c10::cuda::CUDAGuard guard(stats.device());
  kf_check_cuda(kf_launch_running_stats(stats.data_ptr<float>(), channels, mean.data_ptr(), var.data_ptr(), elem,
                                        batches.numel() ? batches.data_ptr<int64_t>() : nullptr, cumulative,
                                        static_cast<float>(momentum),
                                        static_cast<float>(count), c10::cuda::getCurrentCUDAStream()),
                name);
  return true;
}
