// kf_host.h — the host (.cpp, torch) side of the codegen templates: iteration shapes and strided views built
// from at::Tensor, CUDA error reporting, and workspace from torch's caching allocator. No CUDA kernels here.
//
// ---------------------------------------------------------------------------------------------- contract
//   KfShape kf_shape_of(at::IntArrayRef sizes)                 sizes as a KfShape (ndim <= KF_MAX_DIMS)
//   KfShape kf_broadcast_shape(std::initializer_list<at::Tensor> ts)
//   KfShape kf_broadcast_shape(const std::vector<at::Tensor>& ts)
//                                                              torch's broadcast of the tensors' shapes
//   KfTensorRef kf_ref(const at::Tensor& t, const KfShape& shape)
//                                                              t seen through `shape`: its dims right-aligned,
//                                                              stride 0 where t has size 1 or lacks the dim
//   void kf_check_cuda(cudaError_t err, const char* what)      raises "what: <CUDA error string>"
//   at::Tensor kf_workspace(size_t bytes, const at::Tensor& like)
//                                                              uint8 scratch on like's device (empty for 0)
// Every failure is a TORCH_CHECK (RuntimeError in Python) with a one-line message. Messages are assembled
// from std::string and std::to_string only: on the device host, ostream insertion of numbers into a
// TORCH_CHECK message crashed the process. Host API as in PyTorch 2.1 / CUDA 12.1.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#include <initializer_list>
#include <string>
#include <vector>
#include "kf_types.h"

inline std::string kf_sizes_text(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

inline std::string kf_shape_text(const KfShape& shape) {
  return kf_sizes_text(at::IntArrayRef(shape.size, static_cast<size_t>(shape.ndim)));
}

inline KfShape kf_shape_of(at::IntArrayRef sizes) {
  TORCH_CHECK(sizes.size() <= KF_MAX_DIMS, std::string("kforge: shape ") + kf_sizes_text(sizes) + " has " +
                                               std::to_string(sizes.size()) + " dims, more than the " +
                                               std::to_string(KF_MAX_DIMS) + " the kernels support");
  KfShape shape{};
  shape.ndim = static_cast<int>(sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    TORCH_CHECK(sizes[d] >= 0, std::string("kforge: negative size in shape ") + kf_sizes_text(sizes));
    shape.size[d] = sizes[d];
  }
  return shape;
}

inline KfShape kf_broadcast_shape(const std::vector<at::Tensor>& ts) {
  std::vector<int64_t> out;
  for (const at::Tensor& t : ts) {
    TORCH_CHECK(t.defined(), "kforge: broadcast of an undefined tensor");
    const at::IntArrayRef sizes = t.sizes();
    if (sizes.size() > out.size()) out.insert(out.begin(), sizes.size() - out.size(), 1);
    const size_t shift = out.size() - sizes.size();
    for (size_t d = 0; d < sizes.size(); ++d) {
      int64_t& o = out[shift + d];
      const int64_t s = sizes[d];
      TORCH_CHECK(s == o || s == 1 || o == 1,
                  std::string("kforge: shapes do not broadcast: ") + kf_sizes_text(sizes) + " against " +
                      kf_sizes_text(out) + " at dim " + std::to_string(shift + d));
      if (o == 1) o = s;
    }
  }
  return kf_shape_of(out);
}

inline KfShape kf_broadcast_shape(std::initializer_list<at::Tensor> ts) {
  return kf_broadcast_shape(std::vector<at::Tensor>(ts));
}

inline KfTensorRef kf_ref(const at::Tensor& t, const KfShape& shape) {
  TORCH_CHECK(t.defined(), "kforge: undefined tensor given as a kernel input");
  const int64_t nd = t.dim();
  TORCH_CHECK(nd <= shape.ndim, std::string("kforge: a tensor of shape ") + kf_sizes_text(t.sizes()) +
                                    " does not broadcast to " + kf_shape_text(shape));
  KfTensorRef ref{};
  ref.data = t.data_ptr();
  const int64_t shift = shape.ndim - nd;
  for (int d = 0; d < shape.ndim; ++d) {
    const int64_t td = d - shift;
    if (td < 0) {
      ref.stride[d] = 0;
      continue;
    }
    const int64_t s = t.size(td);
    TORCH_CHECK(s == shape.size[d] || s == 1, std::string("kforge: a tensor of shape ") + kf_sizes_text(t.sizes()) +
                                                  " does not broadcast to " + kf_shape_text(shape) + " at dim " +
                                                  std::to_string(d));
    // A size-1 dim is broadcast (stride 0) whatever its stored stride: coalescing then sees it as such.
    ref.stride[d] = s == 1 ? 0 : t.stride(td);
  }
  return ref;
}

inline void kf_check_cuda(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, std::string(what) + ": " + cudaGetErrorString(err));
}

inline at::Tensor kf_workspace(size_t bytes, const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}
