// Small device helpers shared by kf_normalize.cuh and kf_pool.cuh: loading a functor's typed inputs into its
// fp32 slot array, the zero-input slot convention, and division by a runtime size without a hardware divide
// (index decomposition is the integer hot spot of strided kernels).
#pragma once
#include "kf_common.cuh"

// Functors with kIn == 0 still take an array parameter (C++ has no zero-size arrays): they declare
// `const float (&x)[kf_slots(kIn)]`, i.e. `[1]`, and never read it. For kIn >= 1 this is exactly `[kIn]`.
__host__ __device__ constexpr int kf_slots(int n) { return n > 0 ? n : 1; }

// x[i] = kf_load<T_i>(ptr[i], off[i]) for each input type in TIn..., unrolled at compile time.
template <int I, typename... TIn>
struct KfLoadPack;
template <int I>
struct KfLoadPack<I> {
  template <int N>
  __device__ __forceinline__ static void load(float (&)[N], const void* const*, const int64_t*) {}
};
template <int I, typename T, typename... Rest>
struct KfLoadPack<I, T, Rest...> {
  template <int N>
  __device__ __forceinline__ static void load(float (&x)[N], const void* const* ptr, const int64_t* off) {
    x[I] = kf_load<T>(ptr[I], off[I]);
    KfLoadPack<I + 1, Rest...>::load(x, ptr, off);
  }
};

// n / d and n % d for a divisor fixed at launch. For d < 2^32 and n < 2^32 it is a multiply-high, an add and
// a shift (round-up reciprocal m' = 2^32 + m = floor(2^(32+s) / d) + 1 with s = ceil(log2 d); exact for every
// n < 2^32 since the rounding error n * (m' d - 2^(32+s)) < 2^(32+s)); larger values take the 64-bit divide.
struct KfFastDiv {
  uint64_t d;
  uint32_t m;
  uint32_t s;

  static KfFastDiv make(uint64_t divisor) {
    KfFastDiv f;
    f.d = divisor > 0 ? divisor : 1;
    f.s = 0;
    while (f.s < 32 && (uint64_t(1) << f.s) < f.d) ++f.s;
    // (2^s - d) < d <= 2^32, so the product stays below 2^64 and m below 2^32.
    f.m = f.d <= 0xffffffffull ? uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << f.s) - f.d)) / f.d + 1) : 0u;
    return f;
  }

  __device__ __forceinline__ uint64_t div(uint64_t n) const {
    if (d <= 0xffffffffull && n <= 0xffffffffull) {
      const uint32_t n32 = uint32_t(n);
      return (uint64_t(__umulhi(n32, m)) + n32) >> s;
    }
    return n / d;
  }
  // Returns n % d and replaces n with n / d: peels one coordinate off a linear index (innermost first).
  __device__ __forceinline__ int64_t peel(int64_t& n) const {
    const uint64_t q = div(uint64_t(n));
    const int64_t c = n - int64_t(q * d);
    n = int64_t(q);
    return c;
  }
};
