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
// Masks (masked_fill's, where's condition) are read as 1 / 0; no kernel writes bool.
template <> __device__ __forceinline__ float kf_to_float<bool>(bool v) { return v ? 1.f : 0.f; }
// Integer operands (a mask or positions as int64) are read only where the op computes in fp32 (its result is
// float32: torch converts the integer to float first), rounded to nearest as torch's static_cast is.
template <> __device__ __forceinline__ float kf_to_float<int64_t>(int64_t v) { return __ll2float_rn(v); }
template <> __device__ __forceinline__ float kf_to_float<int32_t>(int32_t v) { return __int2float_rn(v); }
// Narrow integers (uint8 images, int8/int16 data) are exact in fp32.
template <> __device__ __forceinline__ float kf_to_float<int16_t>(int16_t v) { return float(v); }
template <> __device__ __forceinline__ float kf_to_float<int8_t>(int8_t v) { return float(v); }
template <> __device__ __forceinline__ float kf_to_float<uint8_t>(uint8_t v) { return float(v); }

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

// ---------------------------------------------------------------------------------------------------------
// Indexing and memory helpers of the elementwise and reduction templates (kf_elementwise.cuh, kf_reduce.cuh).
#include <type_traits>
#include <utility>

// Index arithmetic type of a launch: 32-bit when every count and every reachable element offset is < 2^31
// (the common case: cheaper index math, fewer registers), 64-bit otherwise.
template <typename IdxT>
struct KfIdxDiv;

// n / d for a divisor fixed at launch (Granlund-Montgomery round-up reciprocal): s = ceil(log2 d),
// m = floor(2^32 (2^s - d) / d) + 1, n / d = (umulhi(n, m) + n) >> s, exact for n, d < 2^31 (the sum stays
// below 2^32). One multiply-high instead of a ~20-instruction integer divide per decomposed coordinate.
template <>
struct KfIdxDiv<uint32_t> {
  uint32_t d, m, s;
  static KfIdxDiv make(int64_t divisor) {
    KfIdxDiv f;
    f.d = static_cast<uint32_t>(divisor > 0 ? divisor : 1);
    f.s = 0;
    while ((uint64_t(1) << f.s) < f.d) ++f.s;
    f.m = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << f.s) - f.d)) / f.d + 1);
    return f;
  }
  __device__ __forceinline__ uint32_t div(uint32_t n) const { return (__umulhi(n, m) + n) >> s; }
};

template <>
struct KfIdxDiv<int64_t> {
  int64_t d;
  static KfIdxDiv make(int64_t divisor) { return KfIdxDiv{divisor > 0 ? divisor : 1}; }
  __device__ __forceinline__ int64_t div(int64_t n) const { return n / d; }
};

// kVec consecutive elements of T as loaded, before their conversion to fp32. A kernel that keeps several
// vectors in flight holds them in this form: a 16-bit vector then takes half the registers its floats would,
// so the loads in flight per thread cost the same registers whatever the element type.
template <typename T, int kVec>
struct alignas(kVec * sizeof(T) >= 16 ? 16 : (kVec * sizeof(T) >= 8 ? 8 : 4)) KfRawVec {
  T t[kVec];
};

// kf_load_vec's loads (below: the same alignment contract), the elements kept as loaded.
template <typename T, int kVec, typename IdxT>
__device__ __forceinline__ void kf_load_raw(const void* base, IdxT off, bool bcast, KfRawVec<T, kVec>& r) {
  const T* p = static_cast<const T*>(base) + off;
  if (kVec == 1 || bcast) {
    const T s = *p;
#pragma unroll
    for (int j = 0; j < kVec; ++j) r.t[j] = s;
    return;
  }
  if constexpr (kVec > 1 && kVec * sizeof(T) < 16) {
    static_assert(kVec * sizeof(T) == 4 || kVec * sizeof(T) == 8, "a narrow vector is one 4- or 8-byte word");
    using Word = typename std::conditional<kVec * sizeof(T) == 4, uint32_t, uint2>::type;
    *reinterpret_cast<Word*>(r.t) = *reinterpret_cast<const Word*>(p);
  } else {
    static_assert(kVec == 1 || (kVec * sizeof(T)) % 16 == 0, "vector loads are whole 16-byte words");
    constexpr int kWords = kVec == 1 ? 1 : int(kVec * sizeof(T) / 16);
#pragma unroll
    for (int w = 0; w < kWords; ++w) reinterpret_cast<uint4*>(r.t)[w] = reinterpret_cast<const uint4*>(p)[w];
  }
}

template <typename T, int kVec>
__device__ __forceinline__ void kf_raw_to_float(const KfRawVec<T, kVec>& r, float (&v)[kVec]) {
#pragma unroll
  for (int j = 0; j < kVec; ++j) v[j] = kf_to_float<T>(r.t[j]);
}

// kVec consecutive elements of T at base + off as fp32, in 16-byte loads (kVec * sizeof(T) is a multiple of
// 16, or 4 / 8 for a bool operand, and base + off is aligned to that: the launchers check both). `bcast` (the operand is broadcast along
// the vectorised dim, uniform across the grid) loads one element and replicates it.
template <typename T, int kVec, typename IdxT>
__device__ __forceinline__ void kf_load_vec(const void* base, IdxT off, bool bcast, float (&v)[kVec]) {
  const T* p = static_cast<const T*>(base) + off;
  if (kVec == 1 || bcast) {
    const float s = kf_to_float<T>(*p);
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = s;
    return;
  }
  if constexpr (kVec > 1 && kVec * sizeof(T) < 16) {
    // A narrow operand (a bool mask beside float data): its kVec elements are one 4- or 8-byte word.
    static_assert(kVec * sizeof(T) == 4 || kVec * sizeof(T) == 8, "a narrow vector is one 4- or 8-byte word");
    using Word = typename std::conditional<kVec * sizeof(T) == 4, uint32_t, uint2>::type;
    const Word raw = *reinterpret_cast<const Word*>(p);
    const T* t = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int j = 0; j < kVec; ++j) v[j] = kf_to_float<T>(t[j]);
  } else {
    static_assert(kVec == 1 || (kVec * sizeof(T)) % 16 == 0, "vector loads are whole 16-byte words");
    constexpr int kWords = kVec == 1 ? 1 : int(kVec * sizeof(T) / 16);
    constexpr int kPerWord = kVec / kWords;
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      const uint4 raw = reinterpret_cast<const uint4*>(p)[w];
      const T* t = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int j = 0; j < kPerWord; ++j) v[w * kPerWord + j] = kf_to_float<T>(t[j]);
    }
  }
}

// Stores kVec fp32 values as T at base + off (16-byte aligned, as above).
template <typename T, int kVec, typename IdxT>
__device__ __forceinline__ void kf_store_vec(void* base, IdxT off, const float (&v)[kVec]) {
  T* p = static_cast<T*>(base) + off;
  if (kVec == 1) {
    *p = kf_from_float<T>(v[0]);
    return;
  }
  constexpr int kWords = kVec == 1 ? 1 : int(kVec * sizeof(T) / 16);
  constexpr int kPerWord = kVec / kWords;
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    uint4 raw;
    T* t = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int j = 0; j < kPerWord; ++j) t[j] = kf_from_float<T>(v[w * kPerWord + j]);
    reinterpret_cast<uint4*>(p)[w] = raw;
  }
}

// Multiprocessor count of the current device, cached per device (grids are sized to fill the chip once).
inline int kf_sm_count() {
  static int cached[64] = {0};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0) return 132;
  if (dev >= 64) {
    int n = 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 132;
  }
  if (cached[dev] == 0) {
    int n = 0;
    cached[dev] = cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && n > 0 ? n : 132;
  }
  return cached[dev];
}

// Resident blocks per SM of a kernel (callers cache it per instantiation; 1 if the query fails).
template <typename Kernel>
inline int kf_blocks_per_sm(Kernel kernel, int threads, size_t smem) {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem) != cudaSuccess || blocks < 1) {
    (void)cudaGetLastError();  // a failed query must not surface as the launch's error
    return 1;
  }
  return blocks;
}

// Whether an accumulator or statistic policy takes K consecutive values at once (a static push_vec<K>),
// cheaper than K single pushes for the ones that have it.
template <class Policy, class = void>
struct KfHasPushVec : std::false_type {};
template <class Policy>
struct KfHasPushVec<Policy, std::void_t<decltype(&Policy::template push_vec<1>)>> : std::true_type {};
// An indexed policy's K consecutive elements with their flat indices (flat, flat + step, ...).
template <class Policy, class = void>
struct KfHasPushVecAt : std::false_type {};
template <class Policy>
struct KfHasPushVecAt<Policy, std::void_t<decltype(&Policy::template push_vec_at<1>)>> : std::true_type {};

// Mean and M2 = sum (x - mean)^2 of K values, in two passes over them: a vector's own partial, merged into
// Welford statistics with Chan's formula (one divide per vector instead of one per element).
template <int K>
__device__ __forceinline__ void kf_mean_m2(const float (&x)[K], float& mean, float& m2) {
  float sum = 0.f;
#pragma unroll
  for (int j = 0; j < K; ++j) sum += x[j];
  mean = sum * (1.f / K);
  m2 = 0.f;
#pragma unroll
  for (int j = 0; j < K; ++j) m2 += (x[j] - mean) * (x[j] - mean);
}

// Smallest element size of a type pack: the vector width of a launch is 16 bytes of its narrowest float
// operand (1-byte operands, bool masks and uint8/int8 data, are not counted: theirs are narrower words, see
// kf_load_vec; the host's kf_ew_vector_width skips them alike).
template <typename... T>
constexpr size_t kf_min_size() {
  size_t m = 16;
  ((m = sizeof(T) > 1 && sizeof(T) < m ? sizeof(T) : m), ...);
  return m;
}

// Largest element size among the operands (bool counted: what a vector of each takes as loaded).
template <typename... T>
constexpr size_t kf_max_size() {
  size_t m = 1;
  ((m = sizeof(T) > m ? sizeof(T) : m), ...);
  return m;
}

// Smallest power of two >= n (n >= 1), and ceil(a / b).
inline int64_t kf_next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
inline int64_t kf_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
