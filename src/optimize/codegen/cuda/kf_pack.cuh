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

// kVec consecutive elements of every input, input i at base[i] + rs[i] * off (rs[i] == 0: broadcast along the
// vector, one element replicated), as fp32: x[i][e]. Vector loads need the alignment kf_load_vec states.
template <int I, int kVec, typename... T>
struct KfVecPack;
template <int I, int kVec>
struct KfVecPack<I, kVec> {
  template <int N>
  __device__ __forceinline__ static void load(float (&)[N][kVec], const void* const*, const int64_t*, const int64_t*,
                                              int64_t) {}
};
template <int I, int kVec, typename T, typename... Rest>
struct KfVecPack<I, kVec, T, Rest...> {
  template <int N>
  __device__ __forceinline__ static void load(float (&x)[N][kVec], const void* const* ptr, const int64_t* base,
                                              const int64_t* rs, int64_t off) {
    kf_load_vec<T, kVec, int64_t>(ptr[I], base[I] + rs[I] * off, rs[I] == 0, x[I]);
    KfVecPack<I + 1, kVec, Rest...>::load(x, ptr, base, rs, off);
  }
};

// The inputs of a row walked in kVec-wide vectors: input i moves along the row when rs[i] != 0 (then contiguous:
// base[i] + off) and is loaded; otherwise it is constant along the row and takes fixed[i], read once per row.
template <int I, int kVec, typename... T>
struct KfRowPack;
template <int I, int kVec>
struct KfRowPack<I, kVec> {
  template <int N>
  __device__ __forceinline__ static void load(float (&)[N][kVec], const void* const*, const int64_t*, const int64_t*,
                                              int64_t, const float (&)[N]) {}
};
template <int I, int kVec, typename T, typename... Rest>
struct KfRowPack<I, kVec, T, Rest...> {
  template <int N>
  __device__ __forceinline__ static void load(float (&x)[N][kVec], const void* const* ptr, const int64_t* base,
                                              const int64_t* rs, int64_t off, const float (&fixed)[N]) {
    if (rs[I] != 0) {
      kf_load_vec<T, kVec, int64_t>(ptr[I], base[I] + off, false, x[I]);
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) x[I][e] = fixed[I];
    }
    KfRowPack<I + 1, kVec, Rest...>::load(x, ptr, base, rs, off, fixed);
  }
};

// n / d and n % d for a divisor fixed at launch, without a hardware divide: a multiply-high by a round-up
// reciprocal, an add and a shift. With s = ceil(log2 d) and W-bit words, m' = 2^W + m = floor(2^(W+s) / d) + 1
// overshoots 2^(W+s) / d by e / d with e = m' d - 2^(W+s) <= d <= 2^s, so n * m' / 2^(W+s) stays below the
// next integer whenever n * e < 2^(W+s): every n < 2^32 for W = 32 (d < 2^32), every n < 2^63 for W = 64.
// Indices below 2^32 (the usual case) take the 32-bit word; larger ones the 64-bit one.
struct KfFastDiv {
  uint64_t d;
  uint64_t m64;
  uint32_t m32;
  uint32_t s;

  static KfFastDiv make(uint64_t divisor) {
    KfFastDiv f;
    f.d = divisor > 0 ? divisor : 1;
    f.s = 0;
    while (f.s < 63 && (uint64_t(1) << f.s) < f.d) ++f.s;
    // (2^s - d) < d, so both quotients fit their word.
    const unsigned __int128 excess = (unsigned __int128)((uint64_t(1) << f.s) - f.d);
    f.m64 = uint64_t(((excess << 64) / f.d) + 1);
    f.m32 = f.d <= 0xffffffffull ? uint32_t(((excess << 32) / f.d) + 1) : 0u;
    return f;
  }

  __device__ __forceinline__ uint64_t div(uint64_t n) const {
    if (((n | d) >> 32) == 0) {
      const uint32_t n32 = uint32_t(n);
      return (uint64_t(__umulhi(n32, m32)) + n32) >> s;
    }
    return (__umul64hi(n, m64) + n) >> s;
  }
  // Returns n % d and replaces n with n / d: peels one coordinate off a linear index (innermost first).
  __device__ __forceinline__ int64_t peel(int64_t& n) const {
    const uint64_t q = div(uint64_t(n));
    const int64_t c = n - int64_t(q * d);
    n = int64_t(q);
    return c;
  }
};
