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
