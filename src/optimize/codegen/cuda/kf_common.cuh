// Shared by every generated kernel: scalar conversion to and from fp32 (all math is fp32), the iteration
// shape and strided tensor views the launchers take, and error propagation without torch headers (the .cu
// translation unit never includes torch/extension.h; the host .cpp turns a cudaError_t into a TORCH_CHECK).
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "kf_types.h"

template <typename T> __device__ __forceinline__ float kf_to_float(T v);
template <> __device__ __forceinline__ float kf_to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float kf_to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float kf_to_float<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T kf_from_float(float v);
template <> __device__ __forceinline__ float kf_from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half kf_from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 kf_from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

template <typename T> __device__ __forceinline__ float kf_load(const void* base, int64_t offset) {
  return kf_to_float<T>(static_cast<const T*>(base)[offset]);
}
template <typename T> __device__ __forceinline__ void kf_store(void* base, int64_t offset, float v) {
  static_cast<T*>(base)[offset] = kf_from_float<T>(v);
}

// The launch error, if any, for the host side to raise; cudaSuccess otherwise.
#define KF_RETURN_IF_ERROR(expr)                   \
  do {                                             \
    cudaError_t kf_err_ = (expr);                  \
    if (kf_err_ != cudaSuccess) return kf_err_;    \
  } while (0)
