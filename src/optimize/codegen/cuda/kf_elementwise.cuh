// kf_elementwise.cuh — one generated pointwise functor over a broadcast iteration space, output contiguous.
//
// ---------------------------------------------------------------------------------------------- contract
// Functor (generated; all math fp32):
//   struct F { static constexpr int kIn = N;          // 1 <= N <= KF_EW_MAX_IN (11)
//              __device__ float operator()(const float (&x)[kIn], const KfScalars& sc) const; };
//
//   cudaError_t kf_launch_elementwise<F, TOut, TIn...>(shape, out, in, sc, stream)
//   shape   the broadcast output shape, 0 <= ndim <= KF_MAX_DIMS (ndim 0: one element).
//   out     TOut elements, contiguous (row-major) in `shape`.
//   in[k]   k < F::kIn: element strides per dim of `shape` (0 where broadcast; any non-negative layout:
//           transposed, sliced, expanded), element type TIn[k]. sizeof...(TIn) == F::kIn.
//   TOut, TIn: float, __half, __nv_bfloat16 (any mix).
//   Returns cudaGetLastError() after the launch; cudaSuccess without a launch when the shape is empty;
//   cudaErrorInvalidValue for ndim out of range or a negative size. out[e] = F(in[0..kIn)[e], sc) for
//   every element e; `out` may alias an input that has exactly its layout (each element is read before it
//   is written, by the same thread).
//
// ---------------------------------------------------------------------------------------------- design
// The host coalesces the shape as TensorIterator does: size-1 dims dropped, adjacent dims merged where every
// operand's strides allow (stride[outer] == stride[inner] * size[inner]), so a contiguous or
// broadcast-by-row problem becomes 1-2 dims. Then:
//  - vector path: when the innermost coalesced dim is contiguous (stride 1) or broadcast (stride 0) for every
//    input, its length is a multiple of kVec (or it is the only dim: the tail is done element-wise) and every
//    touched vector is 16-byte aligned, each thread moves kVec = 16 / (smallest element size) elements per
//    operand in 16-byte words (4 floats, 8 halves). The innermost dim is counted in vectors, so the index
//    decomposition below runs once per vector.
//  - tiled path: one operand transposed against the output across the two innermost coalesced dims
//    (a channels-last conv output feeding an NCHW result coalesces to [HW, C, N] with that operand's strides
//    [C, 1, HWC]). A tile of 4096 elements of that operand (16, 32 or 64 along dim 1, as wide as dim 1
//    needs) is staged through shared memory, so both its reads (along dim 1) and the output's writes (along
//    dim 0) are coalesced and move 4 elements per access; the other operands load directly. One tile per
//    block, as many blocks as tiles.
//    Taken when both dims are >= 16 (below that the strided reads of the generic path are nearly coalesced).
//  - generic path: anything else (transposed, misaligned), one element per index, kUnroll per thread; also
//    every launch past 2^31 elements or offsets (64-bit index math), to keep the kernel count per region low.
// The vector and generic paths are one grid-stride kernel: a grid of (SMs x resident blocks), each thread
// issuing the loads of kUnroll independent indices before the first use, which keeps enough bytes in flight
// to saturate HBM.
// Coordinates come from the linear index by peeling dims innermost-first with a multiply-high divider;
// 32-bit index math when every count and reachable offset is below 2^31.
#pragma once
#include <tuple>
#include "kf_common.cuh"

#define KF_EW_THREADS 256
// A region's 7 operands (planner.ts MAX_REGION_OPERANDS), an anchored conv's bias, and the 3 statistics
// kf_normalize_cl.cuh's apply adds: with fewer, a channels-last group norm with a prologue fell back to the
// strided normalize kernels, 5x slower.
#define KF_EW_MAX_IN 11

// Coalesced iteration space, innermost dim first; size[0] is counted in vectors on the vector path.
template <int N, typename IdxT>
struct KfEwParams {
  int ndim;                        // >= 1
  IdxT size[KF_MAX_DIMS];
  KfIdxDiv<IdxT> div[KF_MAX_DIMS];  // div[d] divides by size[d]
  IdxT stride[N][KF_MAX_DIMS];     // element strides (the vectorised dim's stride is kVec or 0)
  const void* in[N];
  void* out;
  IdxT count;                      // indices to cover: vectors on the vector path, elements otherwise
  uint32_t bcast_mask;             // bit k: operand k is broadcast along the vectorised dim
  IdxT tail_begin, tail_end;       // vector path with ndim == 1: elements [tail_begin, tail_end) done singly
};

// ------------------------------------------------------------------------------------------------ device

// Independent indices per thread per iteration: their loads are all issued before the first use (>= 32 bytes
// in flight per thread for one or two inputs; fewer indices with more inputs, to stay within registers).
template <int kVec, int N>
__host__ __device__ constexpr int kf_ew_unroll() {
  return kVec == 1 ? (N <= 2 ? 4 : (N <= 4 ? 2 : 1)) : (N <= 2 ? 2 : 1);
}

// The functor's inputs at one iteration index (kVec consecutive elements each), one load per operand of TIn...
template <int kVec, typename... TIn, typename IdxT, int N, size_t... K>
__device__ __forceinline__ void kf_ew_load(const KfEwParams<N, IdxT>& p, const IdxT (&off)[N],
                                           float (&v)[N][kVec], std::index_sequence<K...>) {
  (kf_load_vec<TIn, kVec>(p.in[K], off[K], (p.bcast_mask >> K) & 1u, v[K]), ...);
}

template <class F, int kVec, typename IdxT, typename TOut, typename... TIn>
__global__ void __launch_bounds__(KF_EW_THREADS)
    kf_elementwise_kernel(const KfEwParams<sizeof...(TIn), IdxT> p, const KfScalars sc) {
  constexpr int N = sizeof...(TIn);
  constexpr int kUnroll = kf_ew_unroll<kVec, N>();
  const F f{};
  const IdxT step = IdxT(gridDim.x) * (KF_EW_THREADS * kUnroll);
  for (IdxT base = IdxT(blockIdx.x) * (KF_EW_THREADS * kUnroll) + threadIdx.x; base < p.count; base += step) {
    float v[kUnroll][N][kVec];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const IdxT i = base + IdxT(u) * KF_EW_THREADS;
      if (i < p.count) {
        // Peel coordinates innermost-first; the outermost dim needs no division.
        IdxT rem = i;
        IdxT off[N];
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
        for (int d = 0; d < KF_MAX_DIMS; ++d) {
          if (d == p.ndim) break;
          IdxT c = rem;
          if (d + 1 < p.ndim) {
            const IdxT q = p.div[d].div(rem);
            c = rem - q * p.size[d];
            rem = q;
          }
#pragma unroll
          for (int k = 0; k < N; ++k) off[k] += c * p.stride[k][d];
        }
        kf_ew_load<kVec, TIn...>(p, off, v[u], std::index_sequence_for<TIn...>{});
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const IdxT i = base + IdxT(u) * KF_EW_THREADS;
      if (i < p.count) {
        float y[kVec];
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          float x[N];
#pragma unroll
          for (int k = 0; k < N; ++k) x[k] = v[u][k][j];
          y[j] = f(x, sc);
        }
        kf_store_vec<TOut, kVec>(p.out, i * kVec, y);  // the output is contiguous: vector i starts at i * kVec
      }
    }
  }
  // Vector path over one dim whose length is not a multiple of kVec: the last few elements one by one.
  const IdxT t = IdxT(blockIdx.x) * KF_EW_THREADS + threadIdx.x;
  if (p.tail_begin + t < p.tail_end) {
    const IdxT e = p.tail_begin + t;
    IdxT off[N];
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = ((p.bcast_mask >> k) & 1u) ? IdxT(0) : e;
    float v1[N][1];
    kf_ew_load<1, TIn...>(p, off, v1, std::index_sequence_for<TIn...>{});
    float x[N];
#pragma unroll
    for (int k = 0; k < N; ++k) x[k] = v1[k][0];
    kf_store<TOut>(p.out, e, f(x, sc));
  }
}

// ------------------------------------------------------------------------------------------------ host

// The coalesced layout of a launch, before it is narrowed to an index type (innermost dim first).
struct KfEwPlan {
  int ndim;
  int64_t size[KF_MAX_DIMS];
  int64_t stride[KF_EW_MAX_IN][KF_MAX_DIMS];
  int64_t numel;
};

// Drops size-1 dims and merges neighbours whose strides chain for every input (the output is contiguous,
// so it always chains). Returns false for a malformed shape.
inline bool kf_ew_coalesce(const KfShape& shape, const KfTensorRef* in, int n, KfEwPlan& plan) {
  if (shape.ndim < 0 || shape.ndim > KF_MAX_DIMS || n < 1 || n > KF_EW_MAX_IN) return false;
  plan.ndim = 0;
  plan.numel = 1;
  // Walk outermost -> innermost, building an outer-first list, then reverse it.
  int64_t size[KF_MAX_DIMS];
  int64_t stride[KF_EW_MAX_IN][KF_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < shape.ndim; ++d) {
    const int64_t s = shape.size[d];
    if (s < 0) return false;
    plan.numel *= s;
    if (s == 1) continue;
    bool merge = nd > 0;
    for (int k = 0; k < n && merge; ++k) merge = stride[k][nd - 1] == in[k].stride[d] * s;
    if (merge) {
      size[nd - 1] *= s;
      for (int k = 0; k < n; ++k) stride[k][nd - 1] = in[k].stride[d];
    } else {
      size[nd] = s;
      for (int k = 0; k < n; ++k) stride[k][nd] = in[k].stride[d];
      ++nd;
    }
  }
  if (nd == 0) {  // a single element: one dim of size 1
    size[0] = 1;
    for (int k = 0; k < n; ++k) stride[k][0] = 0;
    nd = 1;
  }
  plan.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    plan.size[d] = size[nd - 1 - d];
    for (int k = 0; k < n; ++k) plan.stride[k][d] = stride[k][nd - 1 - d];
  }
  return true;
}

// True when every count and every operand offset reachable in the plan fits in a signed 32-bit int.
inline bool kf_ew_fits_32bit(const KfEwPlan& plan, int n) {
  const int64_t lim = (int64_t(1) << 31) - 1;
  if (plan.numel > lim) return false;
  for (int k = 0; k < n; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < plan.ndim; ++d) {
      if (plan.stride[k][d] < 0) return false;
      reach += (plan.size[d] - 1) * plan.stride[k][d];
      if (reach > lim) return false;
    }
  }
  return true;
}

// Vector width when the vector path applies (see the header comment), else 1.
inline int kf_ew_vector_width(const KfEwPlan& plan, const KfTensorRef* in, const int* elem_bytes, int n,
                              const void* out, int out_bytes) {
  int min_bytes = out_bytes;  // of the float operands: a bool mask (1 byte) loads a narrower word (kf_load_vec)
  for (int k = 0; k < n; ++k) min_bytes = elem_bytes[k] > 1 && elem_bytes[k] < min_bytes ? elem_bytes[k] : min_bytes;
  const int vec = 16 / min_bytes;
  if (plan.size[0] < vec) return 1;
  if (plan.ndim > 1 && plan.size[0] % vec != 0) return 1;
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) return 1;
  for (int k = 0; k < n; ++k) {
    const int64_t inner = plan.stride[k][0];
    if (inner == 0) continue;  // broadcast along the vector: one scalar load
    const int word = vec * elem_bytes[k] < 16 ? vec * elem_bytes[k] : 16;
    if (inner != 1 || reinterpret_cast<uintptr_t>(in[k].data) % word != 0) return 1;
    for (int d = 1; d < plan.ndim; ++d)
      if ((plan.stride[k][d] * elem_bytes[k]) % word != 0) return 1;
  }
  return vec;
}

template <class F, int kVec, typename IdxT, typename TOut, typename... TIn>
cudaError_t kf_ew_run(const KfEwPlan& plan, void* out, const KfTensorRef* in, const KfScalars& sc,
                      cudaStream_t stream) {
  constexpr int N = sizeof...(TIn);
  KfEwParams<N, IdxT> p;
  p.ndim = plan.ndim;
  p.bcast_mask = 0;
  for (int d = 0; d < plan.ndim; ++d) {
    const int64_t size = d == 0 ? plan.size[0] / kVec : plan.size[d];
    p.size[d] = IdxT(size);
    p.div[d] = KfIdxDiv<IdxT>::make(size);
    for (int k = 0; k < N; ++k) p.stride[k][d] = IdxT(d == 0 ? plan.stride[k][0] * kVec : plan.stride[k][d]);
  }
  for (int k = 0; k < N; ++k) {
    p.in[k] = in[k].data;
    if (kVec > 1 && plan.stride[k][0] == 0) p.bcast_mask |= 1u << k;
  }
  p.out = out;
  // The vectorised dim counts whole vectors; with a single dim the remainder becomes the tail.
  int64_t outer = 1;
  for (int d = 1; d < plan.ndim; ++d) outer *= plan.size[d];
  p.count = IdxT(outer * (plan.size[0] / kVec));
  p.tail_begin = IdxT(kVec > 1 && plan.ndim == 1 ? (plan.size[0] / kVec) * kVec : 0);
  p.tail_end = IdxT(kVec > 1 && plan.ndim == 1 ? plan.size[0] : 0);

  auto kernel = kf_elementwise_kernel<F, kVec, IdxT, TOut, TIn...>;
  static const int resident = kf_blocks_per_sm(kernel, KF_EW_THREADS, 0);
  constexpr int kUnroll = kf_ew_unroll<kVec, N>();
  const int64_t wanted = kf_ceil_div(int64_t(p.count), int64_t(KF_EW_THREADS) * kUnroll);
  const int64_t cap = int64_t(kf_sm_count()) * resident;
  const int64_t grid = wanted < 1 ? 1 : (wanted < cap ? wanted : cap);
  kernel<<<dim3(unsigned(grid)), KF_EW_THREADS, 0, stream>>>(p, sc);
  return cudaGetLastError();
}

// ------------------------------------------------------------------------------------------------ tiled path

// One tile of T0 x T1 elements (dim 0 x dim 1, T0 * T1 = 4096) per block of 256 threads, and as many blocks as
// tiles: blocks the scheduler starts in order keep the tiles in flight close together in memory, and their
// writes (rows of the output far apart along dim 1) close together too. A block that loops over tiles lets
// the blocks drift apart, and that cost a quarter of the bandwidth (bench/optimize/tiled_ab/). T1 follows
// dim 1's size (16, 32 or 64: the staged operand's rows, usually a conv's channels), so a narrow dim 1 does
// not leave three quarters of a 64-wide tile empty; a launch parameter, not a template one (one kernel per
// functor: compile time).
// Global memory moves in runs of 4 elements (one 16- or 8-byte access when the run is whole and aligned, else
// element by element): staged operands along dim 1, everything else and the output along dim 0. Shared memory
// holds the staged tile as [dim 1][dim 0] with a pitch of T0 + 1 floats.
#define KF_EW_TILE_ELEMS 4096
#define KF_EW_TILE_SMEM (64 * 65)  // floats: T1 rows of T0 + 1, largest at T1 = 64
#define KF_EW_TILED_THREADS 256
// One staged operand (a conv output, a permuted input): a second one's runs are chosen at run time, and its
// registers would be indexed at run time (local memory).
#define KF_EW_MAX_STAGED 1

template <int N>
struct KfEwTiledParams {
  uint32_t size0, size1, tiles0, tiles1;
  int t0, t1_runs_log2, t0_runs_log2;        // T0; log2 of T1 / 4 and of T0 / 4
  int nouter;                                // dims 2.. of the plan, innermost first
  uint32_t osize[KF_MAX_DIMS];
  KfIdxDiv<uint32_t> odiv[KF_MAX_DIMS];
  KfIdxDiv<uint32_t> div_tiles0, div_tiles1;
  uint32_t stride[N][KF_MAX_DIMS];           // element strides of every plan dim
  int staged;                                // the operand staged through shared memory
  uint32_t run_mask;                         // bit k: operand k's runs of 4 are aligned whole accesses
  bool out_runs;                             // the output's runs of 4 along dim 0 are aligned
  const void* in[N];
  void* out;
};

template <int K, typename... T>
using kf_nth_t = typename std::tuple_element<K, std::tuple<T...>>::type;

// Four consecutive elements of T at base + off as fp32 in one access (off is a multiple of 4 elements).
template <typename T>
__device__ __forceinline__ void kf_load_run(const void* base, uint32_t off, float (&v)[4]) {
  const T* p = static_cast<const T*>(base) + off;
  if constexpr (sizeof(T) == 4) {
    const float4 r = *reinterpret_cast<const float4*>(p);
    v[0] = kf_to_float<T>(reinterpret_cast<const T&>(r.x));
    v[1] = kf_to_float<T>(reinterpret_cast<const T&>(r.y));
    v[2] = kf_to_float<T>(reinterpret_cast<const T&>(r.z));
    v[3] = kf_to_float<T>(reinterpret_cast<const T&>(r.w));
  } else if constexpr (sizeof(T) == 8) {  // an int64 operand: two 16-byte words
    const longlong2 a = reinterpret_cast<const longlong2*>(p)[0];
    const longlong2 b = reinterpret_cast<const longlong2*>(p)[1];
    v[0] = kf_to_float<T>(reinterpret_cast<const T&>(a.x));
    v[1] = kf_to_float<T>(reinterpret_cast<const T&>(a.y));
    v[2] = kf_to_float<T>(reinterpret_cast<const T&>(b.x));
    v[3] = kf_to_float<T>(reinterpret_cast<const T&>(b.y));
  } else if constexpr (sizeof(T) == 1) {  // a bool mask: four bytes
    const uint32_t r = *reinterpret_cast<const uint32_t*>(p);
    const T* t = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = kf_to_float<T>(t[j]);
  } else {
    static_assert(sizeof(T) == 2, "runs of 8-, 4-, 2- or 1-byte elements");
    const uint2 r = *reinterpret_cast<const uint2*>(p);
    const T* t = reinterpret_cast<const T*>(&r);
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = kf_to_float<T>(t[j]);
  }
}

template <typename T>
__device__ __forceinline__ void kf_store_run(void* base, uint32_t off, const float (&v)[4]) {
  T* p = static_cast<T*>(base) + off;
  if constexpr (sizeof(T) == 4) {
    float4 r;
    reinterpret_cast<T&>(r.x) = kf_from_float<T>(v[0]);
    reinterpret_cast<T&>(r.y) = kf_from_float<T>(v[1]);
    reinterpret_cast<T&>(r.z) = kf_from_float<T>(v[2]);
    reinterpret_cast<T&>(r.w) = kf_from_float<T>(v[3]);
    *reinterpret_cast<float4*>(p) = r;
  } else {
    uint2 r;
    T* t = reinterpret_cast<T*>(&r);
#pragma unroll
    for (int j = 0; j < 4; ++j) t[j] = kf_from_float<T>(v[j]);
    *reinterpret_cast<uint2*>(p) = r;
  }
}

// Up to 4 elements of T starting at `off`, `step` apart, the first `n` of them (n >= 1): one access when the
// run is whole, contiguous and aligned (`whole`), else element by element.
template <typename T>
__device__ __forceinline__ void kf_load_strided_run(const void* base, uint32_t off, uint32_t step, int n,
                                                    bool whole, float (&v)[4]) {
  if (whole) {
    kf_load_run<T>(base, off, v);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) v[j] = j < n ? kf_load<T>(base, int64_t(off) + int64_t(j) * step) : 0.f;
}

// Up to 4 consecutive elements of T at base + off as they are stored, the first `n` of them: one access when the
// run is whole and aligned (`whole`), else element by element (the rest zero).
template <typename T>
__device__ __forceinline__ void kf_load_raw_run(const void* base, uint32_t off, int n, bool whole, T (&r)[4]) {
  const T* p = static_cast<const T*>(base) + off;
  if (whole) {
    if constexpr (sizeof(T) == 8) {
      reinterpret_cast<longlong2*>(r)[0] = reinterpret_cast<const longlong2*>(p)[0];
      reinterpret_cast<longlong2*>(r)[1] = reinterpret_cast<const longlong2*>(p)[1];
    } else if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<uint4*>(r) = *reinterpret_cast<const uint4*>(p);
    } else if constexpr (sizeof(T) == 2) {
      *reinterpret_cast<uint2*>(r) = *reinterpret_cast<const uint2*>(p);
    } else {
      static_assert(sizeof(T) == 1, "runs of 8-, 4-, 2- or 1-byte elements");
      *reinterpret_cast<uint32_t*>(r) = *reinterpret_cast<const uint32_t*>(p);
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) r[j] = j < n ? p[j] : T{};
}

// The staged operand's tile into shared memory ([dim 1][dim 0], `pitch` floats a row): a recursion over the
// operands that finds it by index at compile time (its element type is a template argument). Runs of 4 along
// dim 1 are loaded as stored (a 16-bit run is two registers), every load issued before the first shared store:
// a load and its store per run left one load in flight per thread (the runs' alignment branches keep ptxas from
// hoisting the next ones). 4-byte cp.async into the transposed tile instead was slower (tiled_ab run 6).
template <int K, typename... TIn>
struct KfEwTileStage {
  template <int N>
  __device__ __forceinline__ static void run(const KfEwTiledParams<N>& p, const uint32_t (&base)[N], uint32_t b0,
                                             uint32_t b1, float* tile, int pitch) {
    if constexpr (K < N) {
      if (p.staged != K) {
        KfEwTileStage<K + 1, TIn...>::run(p, base, b0, b1, tile, pitch);
        return;
      }
      using T = kf_nth_t<K, TIn...>;
      // Held as stored up to 4 bytes (a 16-bit run in two registers); wider elements (int64) as fp32 at once.
      using Held = std::conditional_t<(sizeof(T) > 4), float, T>;
      constexpr int kPasses = KF_EW_TILE_ELEMS / 4 / KF_EW_TILED_THREADS;
      Held v[kPasses][4];  // runs past the tile's edge stay unset: their shared slots are never read
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int idx = threadIdx.x + i * KF_EW_TILED_THREADS;
        const int col = idx >> p.t1_runs_log2, row = (idx & ((1 << p.t1_runs_log2) - 1)) * 4;
        const uint32_t d0 = b0 + col, d1 = b1 + row;
        const int n1 = int(min(uint32_t(4), p.size1 - min(p.size1, d1)));
        const uint32_t off = base[K] + d0 * p.stride[K][0] + d1;
        const bool whole = n1 == 4 && ((p.run_mask >> K) & 1u);
        if (d0 < p.size0 && n1 > 0) {
          if constexpr (sizeof(T) > 4)
            kf_load_strided_run<T>(p.in[K], off, 1, n1, whole, v[i]);
          else
            kf_load_raw_run<T>(p.in[K], off, n1, whole, v[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < kPasses; ++i) {
        const int idx = threadIdx.x + i * KF_EW_TILED_THREADS;
        const int col = idx >> p.t1_runs_log2, row = (idx & ((1 << p.t1_runs_log2) - 1)) * 4;
#pragma unroll
        for (int j = 0; j < 4; ++j) tile[(row + j) * pitch + col] = kf_to_float<Held>(v[i][j]);
      }
    }
  }
};

// The functor's inputs at (d0 .. d0 + n0 - 1, d1): the staged operand from its tile, the others from memory.
// Operands in kUniform0 are known to be broadcast along dim 0: one load is all four inputs, the same value
// to the compiler, so the functor's math on them alone is evaluated once per run (a normalisation's
// statistics: its divide and square root).
template <uint32_t kUniform0, typename... TIn, int N, size_t... K>
__device__ __forceinline__ void kf_ew_tile_inputs(const KfEwTiledParams<N>& p, const uint32_t (&base)[N],
                                                  uint32_t d0, uint32_t d1, int n0, const float* staged,
                                                  float (&x)[4][N], std::index_sequence<K...>) {
  (
      [&] {
        float v[4];
        if constexpr ((kUniform0 >> K) & 1u) {
          const float b = kf_load<kf_nth_t<K, TIn...>>(p.in[K], base[K] + d1 * p.stride[K][1]);
#pragma unroll
          for (int j = 0; j < 4; ++j) v[j] = b;
        } else if (p.staged == int(K)) {
#pragma unroll
          for (int j = 0; j < 4; ++j) v[j] = staged[j];
        } else {
          const uint32_t s0 = p.stride[K][0];
          const uint32_t off = base[K] + d0 * s0 + d1 * p.stride[K][1];
          if (s0 == 0) {
            const float b = kf_load<kf_nth_t<K, TIn...>>(p.in[K], off);
#pragma unroll
            for (int j = 0; j < 4; ++j) v[j] = b;
          } else {
            kf_load_strided_run<kf_nth_t<K, TIn...>>(p.in[K], off, s0, n0,
                                                     n0 == 4 && ((p.run_mask >> K) & 1u), v);
          }
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j][K] = v[j];
      }(),
      ...);
}

// Registers: the bound is ptxas's target. Eight blocks of 256 threads (32 registers) is what the bandwidth
// wants (bench/optimize/tiled_ab/); one- and two-input functors fit there with the staged runs' 16 registers
// (zeroing the runs past a tile's edge first cost the 8 bytes that spilled), functors with more operands get
// fewer blocks. Mixed element sizes (a 16-bit activation with an fp32 operand) widen the other operands' runs
// and spilled 8 bytes at 32 registers, so they take the next bound.
template <int N, bool kMixedSizes>
constexpr int kf_ew_tiled_min_blocks() { return N <= 2 && !kMixedSizes ? 8 : N <= 4 ? 6 : 4; }

template <typename TOut, typename... TIn>
constexpr bool kf_mixed_sizes() { return ((sizeof(TIn) != sizeof(TOut)) || ...); }

template <class F, uint32_t kUniform0, typename TOut, typename... TIn>
__global__ void __launch_bounds__(KF_EW_TILED_THREADS,
                                  kf_ew_tiled_min_blocks<sizeof...(TIn), kf_mixed_sizes<TOut, TIn...>()>())
    kf_ew_tiled_kernel(const KfEwTiledParams<sizeof...(TIn)> p, const KfScalars sc) {
  constexpr int N = sizeof...(TIn);
  constexpr int kPasses = KF_EW_TILE_ELEMS / 4 / KF_EW_TILED_THREADS;  // runs of 4 per thread, both phases
  __shared__ float tile[KF_EW_TILE_SMEM];  // [dim 1][dim 0], pitch T0 + 1
  const int pitch = p.t0 + 1;
  const F f{};
  // This block's tile: its first element along dims 0 and 1, and each operand's offset at its outer index.
  const uint32_t t = blockIdx.x;
  const uint32_t q0 = p.div_tiles0.div(t);
  uint32_t rem = p.div_tiles1.div(q0);
  const uint32_t b0 = (t - q0 * p.tiles0) * uint32_t(p.t0);
  const uint32_t b1 = (q0 - rem * p.tiles1) * uint32_t(KF_EW_TILE_ELEMS / p.t0);
  const uint32_t outer = rem;
  uint32_t base[N];
#pragma unroll
  for (int k = 0; k < N; ++k) base[k] = 0;
#pragma unroll
  for (int d = 0; d < KF_MAX_DIMS - 2; ++d) {
    if (d == p.nouter) break;
    const uint32_t q = p.odiv[d].div(rem);
    const uint32_t cd = rem - q * p.osize[d];
    rem = q;
#pragma unroll
    for (int k = 0; k < N; ++k) base[k] += cd * p.stride[k][d + 2];
  }
  KfEwTileStage<0, TIn...>::run(p, base, b0, b1, tile, pitch);
  __syncthreads();
  // Compute: rows along dim 1, runs along dim 0.
#pragma unroll
  for (int i = 0; i < kPasses; ++i) {
    const int idx = threadIdx.x + i * KF_EW_TILED_THREADS;
    const int r = idx >> p.t0_runs_log2, c = (idx & ((1 << p.t0_runs_log2) - 1)) * 4;
    const uint32_t d1 = b1 + r;
    const int n0 = int(min(uint32_t(4), p.size0 - min(p.size0, b0 + c)));
    if (d1 >= p.size1 || n0 <= 0) continue;
    float x[4][N];
    kf_ew_tile_inputs<kUniform0, TIn...>(p, base, b0 + c, d1, n0, tile + r * pitch + c, x,
                                         std::index_sequence_for<TIn...>{});
    float y[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) y[j] = f(x[j], sc);
    const uint32_t o = (outer * p.size1 + d1) * p.size0 + b0 + c;
    if (n0 == 4 && p.out_runs) {
      kf_store_run<TOut>(p.out, o, y);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (j < n0) kf_store<TOut>(p.out, o + j, y[j]);
    }
  }
}

// Operands the tiled path would stage (transposed across dims 0 and 1), or 0 when the path does not apply.
inline int kf_ew_tiled_operands(const KfEwPlan& plan, int n, int* slot) {
  if (plan.ndim < 2 || plan.size[0] < 16 || plan.size[1] < 16) return 0;
  int staged = 0;
  for (int k = 0; k < n; ++k) {
    const bool transposed = plan.stride[k][1] == 1 && plan.stride[k][0] > 1;
    slot[k] = transposed && staged < KF_EW_MAX_STAGED ? staged++ : -1;
    if (transposed && slot[k] < 0) return 0;
  }
  return staged;
}

// Whether runs of 4 elements of an operand along `dim` (unit stride there) are aligned whole accesses:
// the base and every other dim's stride keep a run's first element on a 4-element boundary.
inline bool kf_ew_runs_aligned(const KfEwPlan& plan, int k, int dim, const void* data, int elem_bytes) {
  if (plan.stride[k][dim] != 1 || plan.size[dim] % 4 != 0) return false;
  if (reinterpret_cast<uintptr_t>(data) % (4 * elem_bytes) != 0) return false;
  for (int d = 0; d < plan.ndim; ++d)
    if (d != dim && plan.stride[k][d] % 4 != 0) return false;
  return true;
}

// kUniform0: operands the caller knows are broadcast along plan dim 0 (stride 0 there, not staged).
template <class F, uint32_t kUniform0, typename TOut, typename... TIn>
cudaError_t kf_ew_run_tiled(const KfEwPlan& plan, const int* slot, void* out, const KfTensorRef* in,
                            const KfScalars& sc, cudaStream_t stream) {
  constexpr int N = sizeof...(TIn);
  const int elem_bytes[N] = {int(sizeof(TIn))...};
  const int T1 = plan.size[1] <= 16 ? 16 : plan.size[1] <= 32 ? 32 : 64;
  const int T0 = KF_EW_TILE_ELEMS / T1;
  KfEwTiledParams<N> p;
  p.t0 = T0;
  p.t1_runs_log2 = T1 == 16 ? 2 : T1 == 32 ? 3 : 4;
  p.t0_runs_log2 = T1 == 16 ? 6 : T1 == 32 ? 5 : 4;
  p.size0 = uint32_t(plan.size[0]);
  p.size1 = uint32_t(plan.size[1]);
  p.tiles0 = uint32_t(kf_ceil_div(plan.size[0], T0));
  p.tiles1 = uint32_t(kf_ceil_div(plan.size[1], T1));
  p.div_tiles0 = KfIdxDiv<uint32_t>::make(p.tiles0);
  p.div_tiles1 = KfIdxDiv<uint32_t>::make(p.tiles1);
  int64_t outer = 1;
  p.nouter = plan.ndim - 2;
  for (int d = 2; d < plan.ndim; ++d) {
    outer *= plan.size[d];
    p.osize[d - 2] = uint32_t(plan.size[d]);
    p.odiv[d - 2] = KfIdxDiv<uint32_t>::make(plan.size[d]);
  }
  const int64_t tiles = int64_t(p.tiles0) * p.tiles1 * outer;
  if (tiles > (int64_t(1) << 31) - 1) return cudaErrorInvalidValue;  // callers check kf_ew_fits_32bit first
  p.run_mask = 0;
  p.staged = -1;
  for (int k = 0; k < N; ++k) {
    for (int d = 0; d < plan.ndim; ++d) p.stride[k][d] = uint32_t(plan.stride[k][d]);
    if (slot[k] >= 0) p.staged = k;
    p.in[k] = in[k].data;
    if (kf_ew_runs_aligned(plan, k, slot[k] >= 0 ? 1 : 0, in[k].data, elem_bytes[k])) p.run_mask |= 1u << k;
  }
  p.out = out;
  p.out_runs = plan.size[0] % 4 == 0 && reinterpret_cast<uintptr_t>(out) % (4 * sizeof(TOut)) == 0;
  kf_ew_tiled_kernel<F, kUniform0, TOut, TIn...><<<dim3(unsigned(tiles)), KF_EW_TILED_THREADS, 0, stream>>>(p, sc);
  return cudaGetLastError();
}

template <class F, typename TOut, typename... TIn>
cudaError_t kf_launch_elementwise(const KfShape& shape, void* out, const KfTensorRef* in, const KfScalars& sc,
                                  cudaStream_t stream) {
  constexpr int N = sizeof...(TIn);
  static_assert(N == F::kIn, "one input type per functor input");
  static_assert(N >= 1 && N <= KF_EW_MAX_IN, "1..KF_EW_MAX_IN inputs");
  KfEwPlan plan;
  if (!kf_ew_coalesce(shape, in, N, plan)) return cudaErrorInvalidValue;
  if (plan.numel == 0) return cudaSuccess;
  const int elem_bytes[N] = {int(sizeof(TIn))...};
  constexpr int kVec = int(16 / kf_min_size<TOut, TIn...>());
  const bool vec = kf_ew_vector_width(plan, in, elem_bytes, N, out, int(sizeof(TOut))) == kVec;
  if (kf_ew_fits_32bit(plan, N)) {
    int slot[N];
    if (!vec && kf_ew_tiled_operands(plan, N, slot) > 0)
      return kf_ew_run_tiled<F, 0, TOut, TIn...>(plan, slot, out, in, sc, stream);
    return vec ? kf_ew_run<F, kVec, uint32_t, TOut, TIn...>(plan, out, in, sc, stream)
               : kf_ew_run<F, 1, uint32_t, TOut, TIn...>(plan, out, in, sc, stream);
  }
  // Past 2^31 elements (rare) one scalar path: it halves the kernels every region instantiates (compile time).
  return kf_ew_run<F, 1, int64_t, TOut, TIn...>(plan, out, in, sc, stream);
}
