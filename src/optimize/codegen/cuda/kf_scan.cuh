// kf_scan.cuh — an inclusive scan (cumulative sum or product) along one dim of a generated pointwise prologue,
// with a generated pointwise epilogue: out[i] = Epi(Op over j <= i along `dim` of Pro(in[... j ...]), in[... i ...]).
//
// ---------------------------------------------------------------------------------------------- contract
// Functors (generated; all math fp32):
//   struct Pro { static constexpr int kIn = N;     // 1 <= N <= 8
//                __device__ float operator()(const float (&x)[kIn], const KfScalars& sc) const; };
//   struct Epi { static constexpr int kIn = N;
//                __device__ float operator()(float s, const float (&x)[kIn], const KfScalars& sc) const; };
//     (x: every operand's value at the element itself; s: the scan there)
// Operations (provided here): KfScanSum (0, +), KfScanProd (1, *).
//
//   cudaError_t kf_launch_scan<Pro, Op, Epi, TOut, TIn...>(shape, dim, reverse, out, in, sc, stream)
//   shape   iteration shape (the broadcast of the operands), 1 <= ndim <= KF_MAX_DIMS, dim < ndim.
//   reverse scan from the end of the dim: out[i] combines the elements at and after i (a cumulative sum of
//           the flipped input, flipped back).
//   out     TOut elements (float / __half / __nv_bfloat16), contiguous over `shape`.
//   in[k]   element strides per dim of `shape` (0 = broadcast, any non-negative layout), type TIn[k].
//   Returns cudaGetLastError() after the launch; cudaSuccess without one when the output is empty;
//   cudaErrorInvalidValue for a bad ndim or dim. Deterministic: a fixed order of combination per line.
//   The order differs from a sequential scan's (and from PyTorch's) by fp32 rounding only.
//
// ---------------------------------------------------------------------------------------------- geometry
// A line is every element of one index of the other dims, along `dim` (L elements); `inner` is the product of
// the sizes after `dim`, the output's stride along it.
//  - inner == 1 (the scanned dim is innermost, cumsum over the last dim): a block of KF_SCAN_THREADS threads per
//    line, lines grid-strided. The block walks its line in tiles of KF_SCAN_THREADS * KF_SCAN_ITEMS elements.
//    Global memory is touched striped (element t + KF_SCAN_THREADS * i of the tile by thread t: a warp's loads
//    and stores are consecutive addresses whatever the alignment, length or direction), the prologue applied
//    there; its values go through shared memory to a blocked layout (thread t scans KF_SCAN_ITEMS consecutive
//    elements), the block scans the threads' totals (warp shuffles, then the warps' totals in shared memory),
//    adds the carry of the earlier tiles, and the scanned values go back through shared memory to the striped
//    layout, where the epilogue still holds its operands in registers and the stores coalesce.
//  - inner > 1: a thread per line walks it in order, consecutive threads on consecutive inner indices (their
//    loads and stores coalesce along the innermost dim).
// Offsets are 64-bit: the scans this fuses are the large ones (32768 x 32768 elements in KernelBench).
#pragma once
#include <utility>
#include "kf_common.cuh"

#define KF_SCAN_THREADS 256
#define KF_SCAN_ITEMS 8
#define KF_SCAN_MAX_IN 8

struct KfScanSum {
  static __device__ __forceinline__ float identity() { return 0.f; }
  static __device__ __forceinline__ float combine(float a, float b) { return a + b; }
};

struct KfScanProd {
  static __device__ __forceinline__ float identity() { return 1.f; }
  static __device__ __forceinline__ float combine(float a, float b) { return a * b; }
};

// The iteration space seen as lines: the dims other than `dim` (in shape order) index a line.
template <int N>
struct KfScanParams {
  const void* in[N];
  int nline;                          // dims of a line index
  int64_t line_size[KF_MAX_DIMS];
  int64_t line_stride[N][KF_MAX_DIMS];  // each operand's stride along those dims
  int64_t along[N];                   // each operand's stride along `dim`
  int64_t len;                        // L, the size of `dim`
  int64_t inner;                      // elements after `dim`: the output's stride along it
  int64_t lines;
  bool reverse;
};

// Each operand's offset of element 0 of line `line`.
template <int N>
__device__ __forceinline__ void kf_scan_line_offsets(const KfScanParams<N>& p, int64_t line, int64_t (&off)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  for (int d = p.nline - 1; d >= 0; --d) {
    const int64_t size = p.line_size[d];
    const int64_t c = line % size;
    line /= size;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += c * p.line_stride[k][d];
  }
}

template <typename... TIn, int N, size_t... K>
__device__ __forceinline__ void kf_scan_load(const KfScanParams<N>& p, const int64_t (&off)[N], int64_t j,
                                             float (&x)[N], std::index_sequence<K...>) {
  ((x[K] = kf_load<TIn>(p.in[K], off[K] + j * p.along[K])), ...);
}

// Exclusive scan over the block of one value per thread (what the earlier threads combine to); the block's
// total in `total`. Every thread of the block calls it; the caller synchronises the block before the next call
// (which rewrites warp_totals).
template <class Op>
__device__ __forceinline__ float kf_scan_block_exclusive(float v, float* warp_totals, float& total) {
  constexpr int kWarps = KF_SCAN_THREADS / 32;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  float inclusive = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float u = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive = Op::combine(u, inclusive);
  }
  float exclusive = __shfl_up_sync(0xffffffffu, inclusive, 1);
  if (lane == 0) exclusive = Op::identity();
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    float w = lane < kWarps ? warp_totals[lane] : Op::identity();
#pragma unroll
    for (int o = 1; o < kWarps; o <<= 1) {
      const float u = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w = Op::combine(u, w);
    }
    if (lane < kWarps) warp_totals[lane] = w;
  }
  __syncthreads();
  const float earlier_warps = warp == 0 ? Op::identity() : warp_totals[warp - 1];
  total = warp_totals[kWarps - 1];
  return Op::combine(earlier_warps, exclusive);
}

// A tile's slot in shared memory: one pad word per 32 keeps both the striped accesses (consecutive) and the
// blocked ones (a thread's KF_SCAN_ITEMS consecutive elements, threads KF_SCAN_ITEMS apart) free of bank conflicts.
__device__ __forceinline__ int kf_scan_slot(int e) { return e + (e >> 5); }

constexpr int kKfScanTile = KF_SCAN_THREADS * KF_SCAN_ITEMS;
constexpr int kKfScanSlots = kKfScanTile + kKfScanTile / 32;

// inner == 1: a block per line, tiles of kKfScanTile elements.
template <class Pro, class Op, class Epi, typename TOut, typename... TIn>
__global__ void __launch_bounds__(KF_SCAN_THREADS) kf_scan_rows_kernel(KfScanParams<sizeof...(TIn)> p, TOut* out,
                                                                       KfScalars sc) {
  constexpr int N = sizeof...(TIn);
  static_assert(32 % KF_SCAN_ITEMS == 0, "kf_scan_slot keeps blocked reads conflict-free when the items divide a warp");
  // Two tile buffers: a tile's striped reads of the scan (its last step) and the next tile's striped writes of
  // the prologue (its first) then touch different buffers; a buffer is rewritten only after the next tile's
  // first barrier, which every thread passes only once done with it. The same barrier orders warp_totals.
  __shared__ float tile[2][kKfScanSlots];
  __shared__ float warp_totals[KF_SCAN_THREADS / 32];
  const Pro pro;
  const Epi epi;
  const int t = threadIdx.x;
  int buffer = 0;
  for (int64_t line = blockIdx.x; line < p.lines; line += gridDim.x) {
    int64_t off[N];
    kf_scan_line_offsets(p, line, off);
    TOut* row = out + line * p.len;
    float carry = Op::identity();
    for (int64_t start = 0; start < p.len; start += kKfScanTile, buffer ^= 1) {
      float* s = tile[buffer];
      float x[KF_SCAN_ITEMS][N];
#pragma unroll
      for (int i = 0; i < KF_SCAN_ITEMS; ++i) {
        const int64_t pos = start + t + i * KF_SCAN_THREADS;
        float v = Op::identity();
        if (pos < p.len) {
          kf_scan_load<TIn...>(p, off, p.reverse ? p.len - 1 - pos : pos, x[i], std::index_sequence_for<TIn...>{});
          v = pro(x[i], sc);
        }
        s[kf_scan_slot(t + i * KF_SCAN_THREADS)] = v;
      }
      __syncthreads();
      float run[KF_SCAN_ITEMS];
      float acc = Op::identity();
#pragma unroll
      for (int j = 0; j < KF_SCAN_ITEMS; ++j) {
        acc = Op::combine(acc, s[kf_scan_slot(t * KF_SCAN_ITEMS + j)]);
        run[j] = acc;
      }
      float tile_total;
      const float before = Op::combine(carry, kf_scan_block_exclusive<Op>(acc, warp_totals, tile_total));
#pragma unroll
      for (int j = 0; j < KF_SCAN_ITEMS; ++j) s[kf_scan_slot(t * KF_SCAN_ITEMS + j)] = Op::combine(before, run[j]);
      __syncthreads();
#pragma unroll
      for (int i = 0; i < KF_SCAN_ITEMS; ++i) {
        const int64_t pos = start + t + i * KF_SCAN_THREADS;
        if (pos < p.len) {
          const int64_t j = p.reverse ? p.len - 1 - pos : pos;
          row[j] = kf_from_float<TOut>(epi(s[kf_scan_slot(t + i * KF_SCAN_THREADS)], x[i], sc));
        }
      }
      carry = Op::combine(carry, tile_total);
    }
  }
}

// inner > 1: a thread per line, in order along it.
template <class Pro, class Op, class Epi, typename TOut, typename... TIn>
__global__ void __launch_bounds__(KF_SCAN_THREADS) kf_scan_cols_kernel(KfScanParams<sizeof...(TIn)> p, TOut* out,
                                                                       KfScalars sc) {
  constexpr int N = sizeof...(TIn);
  const Pro pro;
  const Epi epi;
  for (int64_t line = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; line < p.lines;
       line += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[N];
    kf_scan_line_offsets(p, line, off);
    TOut* dst = out + (line / p.inner) * p.len * p.inner + line % p.inner;
    float acc = Op::identity();
    for (int64_t step = 0; step < p.len; ++step) {
      const int64_t j = p.reverse ? p.len - 1 - step : step;
      float x[N];
      kf_scan_load<TIn...>(p, off, j, x, std::index_sequence_for<TIn...>{});
      acc = Op::combine(acc, pro(x, sc));
      dst[j * p.inner] = kf_from_float<TOut>(epi(acc, x, sc));
    }
  }
}

template <class Pro, class Op, class Epi, typename TOut, typename... TIn>
cudaError_t kf_launch_scan(const KfShape& shape, int dim, bool reverse, void* out, const KfTensorRef* in,
                           const KfScalars& sc, cudaStream_t stream) {
  constexpr int N = sizeof...(TIn);
  static_assert(N == Pro::kIn && N == Epi::kIn, "one input type per operand");
  static_assert(N >= 1 && N <= KF_SCAN_MAX_IN, "1..8 inputs");
  if (shape.ndim < 1 || shape.ndim > KF_MAX_DIMS || dim < 0 || dim >= shape.ndim) return cudaErrorInvalidValue;
  KfScanParams<N> p{};
  p.len = shape.size[dim];
  p.inner = 1;
  p.lines = 1;
  p.reverse = reverse;
  for (int d = 0; d < shape.ndim; ++d) {
    if (shape.size[d] < 0) return cudaErrorInvalidValue;
    if (d > dim) p.inner *= shape.size[d];
    if (d == dim) continue;
    p.line_size[p.nline] = shape.size[d];
    for (int k = 0; k < N; ++k) p.line_stride[k][p.nline] = in[k].stride[d];
    ++p.nline;
    p.lines *= shape.size[d];
  }
  for (int k = 0; k < N; ++k) {
    p.in[k] = in[k].data;
    p.along[k] = in[k].stride[dim];
  }
  if (p.lines == 0 || p.len == 0) return cudaSuccess;
  const int64_t resident = int64_t(kf_sm_count()) * (2048 / KF_SCAN_THREADS);
  if (p.inner == 1) {
    const int64_t grid = p.lines < resident * 4 ? p.lines : resident * 4;
    kf_scan_rows_kernel<Pro, Op, Epi, TOut, TIn...>
        <<<static_cast<unsigned>(grid), KF_SCAN_THREADS, 0, stream>>>(p, static_cast<TOut*>(out), sc);
  } else {
    const int64_t blocks = (p.lines + KF_SCAN_THREADS - 1) / KF_SCAN_THREADS;
    const int64_t grid = blocks < resident * 4 ? blocks : resident * 4;
    kf_scan_cols_kernel<Pro, Op, Epi, TOut, TIn...>
        <<<static_cast<unsigned>(grid), KF_SCAN_THREADS, 0, stream>>>(p, static_cast<TOut*>(out), sc);
  }
  return cudaGetLastError();
}
