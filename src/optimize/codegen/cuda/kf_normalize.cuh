// kf_normalize.cuh — statistics over an axis set, applied back to every element:
//   v = Pro(x),  s = Stat(v over the reduced dims of the element's kept index),  y = Apply(v, s, x).
// softmax, log_softmax, layer/group/instance/batch/rms norm are this one template with generated functors.
//
// ---------------------------------------------------------------------------------------------- contract
// Functors (generated; all math fp32):
//   struct Pro   { static constexpr int kIn = N;     // N >= 1
//                  __device__ float operator()(const float (&x)[kIn], const KfScalars& sc) const; };
//   struct Apply { static constexpr int kIn = N;     // == Pro::kIn: both get the same inputs at the element
//                  __device__ float operator()(float v, const KfStats& s, const float (&x)[kIn],
//                                              const KfScalars& sc) const; };
// Stat policies (provided here):
//   KfStatMaxSumExp   a = max v, b = sum exp(v - a)           (softmax: exp(v - a) / b; log_softmax: v - a - log b)
//   KfStatWelford     a = mean v, b = M2 = sum (v - mean)^2   (var = b / count; Chan's merge across partials)
//   KfStatMeanSquare  a = mean v*v, b = 0                      (rms norm: v * rsqrt(a + eps))
//   KfStatSum         a = sum v, b = 0                         (a sum or mean broadcast back: x - x.mean(d))
//   KfStatMax/Min     a = max / min v (NaN if any v is NaN)    (x / x.amax(d))
//   s.count is always the number of reduced elements (as float).
//
//   size_t kf_normalize_workspace_bytes<Stat>(shape, reduce_mask)
//   cudaError_t kf_launch_normalize<Pro, Stat, Apply, TOut, TIn...>(shape, reduce_mask, out, in, sc,
//                                     stats_out, workspace, workspace_bytes, stream)
//   shape        iteration shape (ndim <= KF_MAX_DIMS); out is contiguous in it (TOut elements).
//   reduce_mask  bit d set = dim d is reduced. No bit set: stats of each single element. All set: one row.
//   in[i]        element strides per dim of `shape` (0 = broadcast, any sign-free layout), type TIn[i].
//   stats_out    nullable: float[3] {a, b, count} per kept index, kept dims contiguous in their order
//                (BatchNorm training reads batch mean and M2 from it).
//   workspace    device memory of at least kf_normalize_workspace_bytes<Stat>(shape, reduce_mask) bytes,
//                4-byte aligned, contents ignored; may be null when that size is 0. The size depends on the
//                current device's multiprocessor count: query it on the device you launch on.
//   Returns the first CUDA error (launch configuration or launch), cudaErrorInvalidValue for a bad shape,
//   mask, input count or a too-small workspace. An empty shape is a no-op (stats_out untouched).
//   Deterministic: fixed reduction trees, no atomics.
//
// ---------------------------------------------------------------------------------------------- geometry
// The host first canonicalises: size-1 dims dropped, neighbours of the same kind (both kept or both reduced)
// merged where every input's strides allow. K = kept count ("rows"), R = reduced count ("row length").
//  - rows (innermost dim reduced), R small enough to live in registers: ONE pass, x read once, y written once.
//      2 kVec <= R <= 16K  one reduced dim that every input reads with unit stride or broadcasts: 16-byte
//                          vectors; under 256 elements a group of 1..32 lanes per row with ~4 vectors each
//                          (many rows per warp), from 256 a warp (4 rows per block) or 2..16 warps per row with
//                          32 values per thread. Rows of whole 16-byte-aligned vectors as they are. From 256
//                          elements, other rows (odd lengths, views
//                          not starting on 16 bytes) when the operands moving along the row are co-aligned with
//                          the output (same element size, same address mod 16 at every element): vectors start
//                          at the row's first 16-byte boundary, the <= 2 * (kVec - 1) elements before and after
//                          are held singly (PyTorch softmax's aligned shift), so odd rows keep vector loads. A
//                          per-column parameter (its rows all start at one address) is never co-aligned with
//                          rows of a length off 16 bytes: those launches take the scalar kernels below.
//      R <= 128            (rows the vector kernel does not take) a group of 1..32 lanes per row, 4 values per
//                          lane (many rows per warp)
//      R <= 32 * kBigVPT   a warp per row, kBigVPT values per lane
//      R <= 1024 * kBigVPT a block (64..1024 threads) per row; chosen only when there are enough rows to fill
//                          the GPU or the row is short; kBigVPT = 24 / 12 / 8 / 4 values per thread for
//                          1 / 2 / 3-4 / more inputs (every input is held: x is read from DRAM once), so
//                          softmax rows up to 24K, layer norm (x, gamma, beta) rows up to 8K are one pass.
//    These need the reduced dims to be the innermost one or two canonical dims (group norm's [C/G, HW] with
//    per-channel gamma stays two dims), which holds for contiguous and row-strided inputs.
//    Exact two-pass statistics over the held values (max then sum of exp; mean then M2).
//  - rows otherwise (few long rows, BatchNorm's [N, C, HW] reducing N and HW, layouts that do not merge):
//      partial stats over (row, split) blocks, threads along the innermost reduced dim -> finalize -> apply.
//  - columns (innermost dim kept: softmax over dim 1 of NCHW): 32 lanes along the kept inner dim x 8 warps
//    along the reduction, online stats; with enough columns to fill the GPU one kernel does stats and apply
//    (x read twice, the second time mostly from L2), otherwise the reduction is split across blocks ->
//    finalize -> apply; split (or statistics-only) columns read 16 bytes of adjacent columns per lane when the
//    kept inner dim is contiguous (launch_columns).
#pragma once
#include <math.h>
#include <initializer_list>
#include "kf_pack.cuh"
#include "kf_running_stats.cuh"

struct KfStats {
  float a;
  float b;
  float count;
};

// exp(d) for d = v - max <= 0 (or NaN): the hardware's approximate exp2 (two instructions, against ~10 for
// expf's accurate path). Relative error under 1e-5 over softmax's whole range (the scaling by log2(e) rounds
// at most |d| * 2^-24 off), far inside fp32 softmax's tolerance; softmax's apply (once per element, the
// held-row kernels are compute-bound with two expf) uses it. The statistics keep expf: log_softmax's log b
// reads their sum, and the held rows' register budget was set with it.
__device__ __forceinline__ float kf_exp_shifted(float d) { return __expf(d); }

// ---------------------------------------------------------------------------------------------- stat policies
// Streaming form (identity / push / merge / finalize) for partial statistics; resident form (r1_*, r2_term)
// for rows whose values are all held: pass 1 gives a, pass 2 (when kResidentSecondPass) sums r2_term into b.

struct KfStatMaxSumExp {
  static constexpr bool kResidentSecondPass = true;
  __device__ __forceinline__ static KfStats identity() { return {-INFINITY, 0.f, 0.f}; }
  // Online softmax: rescale the running sum when the max moves. Equal values (including both -inf) count
  // exp(0) = 1; an all -inf row then gives softmax's exp(-inf - -inf) = NaN, as torch does.
  __device__ __forceinline__ static void push(KfStats& s, float v) {
    s.count += 1.f;
    if (v > s.a) {
      s.b = s.b * expf(s.a - v) + 1.f;
      s.a = v;
    } else if (v == s.a) {
      s.b += 1.f;
    } else {
      s.b += expf(v - s.a);  // NaN lands here and poisons b: the row's outputs are NaN, as torch's
    }
  }
  __device__ __forceinline__ static KfStats merge(const KfStats& s, const KfStats& t) {
    const float a = fmaxf(s.a, t.a);
    const float b = (s.a == a ? s.b : s.b * expf(s.a - a)) + (t.a == a ? t.b : t.b * expf(t.a - a));
    return {a, b, s.count + t.count};
  }
  // torch sums exp(v - max): with a +inf max that is exp(inf - inf) = NaN, every output of the row NaN.
  __device__ __forceinline__ static void finalize(KfStats& s) {
    if (s.a == INFINITY) s.b = NAN;
  }
  __device__ __forceinline__ static float r1_init() { return -INFINITY; }
  __device__ __forceinline__ static float r1_push(float acc, float v) { return fmaxf(acc, v); }
  __device__ __forceinline__ static float r1_merge(float x, float y) { return fmaxf(x, y); }
  __device__ __forceinline__ static float r1_final(float acc, float) { return acc; }
  // Exactly torch's sum: an all -inf or a +inf max gives NaN, and so NaN outputs, as torch's.
  __device__ __forceinline__ static float r2_term(float v, float a) { return expf(v - a); }
};

struct KfStatWelford {
  static constexpr bool kResidentSecondPass = true;
  __device__ __forceinline__ static KfStats identity() { return {0.f, 0.f, 0.f}; }
  __device__ __forceinline__ static void push(KfStats& s, float v) {
    s.count += 1.f;
    const float d = v - s.a;
    s.a += __fdividef(d, s.count);  // count >= 1: the approximate divide is within 2 ulp, no slow path
    s.b += d * (v - s.a);
  }
  // K elements at once: their own mean and M2, then one Chan merge — one divide per K elements instead of
  // one per element.
  template <int K>
  __device__ __forceinline__ static void push_vec(KfStats& s, const float (&v)[K]) {
    float mean, m2;
    kf_mean_m2(v, mean, m2);
    const float n = s.count + float(K);
    const float w = __fdividef(float(K), n);
    const float d = mean - s.a;
    s.a += d * w;
    s.b += m2 + d * d * s.count * w;
    s.count = n;
  }
  // Chan et al.: combine two (count, mean, M2) partials without cancellation.
  __device__ __forceinline__ static KfStats merge(const KfStats& s, const KfStats& t) {
    const float n = s.count + t.count;
    const float w = n > 0.f ? __fdividef(t.count, n) : 0.f;
    const float d = t.a - s.a;
    return {s.a + d * w, s.b + t.b + d * d * s.count * w, n};
  }
  __device__ __forceinline__ static void finalize(KfStats&) {}
  __device__ __forceinline__ static float r1_init() { return 0.f; }
  __device__ __forceinline__ static float r1_push(float acc, float v) { return acc + v; }
  __device__ __forceinline__ static float r1_merge(float x, float y) { return x + y; }
  __device__ __forceinline__ static float r1_final(float acc, float count) { return acc / count; }
  __device__ __forceinline__ static float r2_term(float v, float a) { const float d = v - a; return d * d; }
};

struct KfStatMeanSquare {
  static constexpr bool kResidentSecondPass = false;
  __device__ __forceinline__ static KfStats identity() { return {0.f, 0.f, 0.f}; }
  // Partials carry the plain sum of squares in a; finalize turns it into the mean.
  __device__ __forceinline__ static void push(KfStats& s, float v) { s.count += 1.f; s.a += v * v; }
  __device__ __forceinline__ static KfStats merge(const KfStats& s, const KfStats& t) {
    return {s.a + t.a, 0.f, s.count + t.count};
  }
  __device__ __forceinline__ static void finalize(KfStats& s) { s.a = s.count > 0.f ? s.a / s.count : 0.f; }
  __device__ __forceinline__ static float r1_init() { return 0.f; }
  __device__ __forceinline__ static float r1_push(float acc, float v) { return acc + v * v; }
  __device__ __forceinline__ static float r1_merge(float x, float y) { return x + y; }
  __device__ __forceinline__ static float r1_final(float acc, float count) { return acc / count; }
  __device__ __forceinline__ static float r2_term(float, float) { return 0.f; }
};

// A reduction's result broadcast back over its rows (x / x.sum(d), x - x.amax(d)): the reduction's own epilogue
// reads these fields as kf_reduce.cuh's KfAccResult has them.
struct KfStatResult {
  float value;
  float m2;
  float count;
};

struct KfStatSum {
  static constexpr bool kResidentSecondPass = false;
  __device__ __forceinline__ static KfStats identity() { return {0.f, 0.f, 0.f}; }
  __device__ __forceinline__ static void push(KfStats& s, float v) { s.count += 1.f; s.a += v; }
  __device__ __forceinline__ static KfStats merge(const KfStats& s, const KfStats& t) {
    return {s.a + t.a, 0.f, s.count + t.count};
  }
  __device__ __forceinline__ static void finalize(KfStats&) {}
  __device__ __forceinline__ static float r1_init() { return 0.f; }
  __device__ __forceinline__ static float r1_push(float acc, float v) { return acc + v; }
  __device__ __forceinline__ static float r1_merge(float x, float y) { return x + y; }
  __device__ __forceinline__ static float r1_final(float acc, float) { return acc; }
  __device__ __forceinline__ static float r2_term(float, float) { return 0.f; }
};

// torch.amax / amin: a NaN anywhere in the row is the result (fmaxf would drop it).
template <bool kMax>
struct KfStatExtreme {
  static constexpr bool kResidentSecondPass = false;
  __device__ __forceinline__ static float pick(float acc, float v) {
    return (v != v || (kMax ? v > acc : v < acc)) ? v : acc;
  }
  __device__ __forceinline__ static KfStats identity() { return {kMax ? -INFINITY : INFINITY, 0.f, 0.f}; }
  __device__ __forceinline__ static void push(KfStats& s, float v) { s.count += 1.f; s.a = pick(s.a, v); }
  __device__ __forceinline__ static KfStats merge(const KfStats& s, const KfStats& t) {
    return {pick(s.a, t.a), 0.f, s.count + t.count};
  }
  __device__ __forceinline__ static void finalize(KfStats&) {}
  __device__ __forceinline__ static float r1_init() { return kMax ? -INFINITY : INFINITY; }
  __device__ __forceinline__ static float r1_push(float acc, float v) { return pick(acc, v); }
  __device__ __forceinline__ static float r1_merge(float x, float y) { return pick(x, y); }
  __device__ __forceinline__ static float r1_final(float acc, float) { return acc; }
  __device__ __forceinline__ static float r2_term(float, float) { return 0.f; }
};
using KfStatMax = KfStatExtreme<true>;
using KfStatMin = KfStatExtreme<false>;

// ---------------------------------------------------------------------------------------------- canonical view
namespace kf_norm {

constexpr int kRowsSmallVPT = 4;          // values per lane of the group-per-row kernel (rows <= 128)
constexpr int kGroupThreads = 256;        // threads per block of the group/warp-per-row kernels
constexpr int kMinGroupBlocks = 4;        // ... resident per SM at least (caps registers at 64)
constexpr int kMaxBlockRowThreads = 1024; // threads per block of the block-per-row kernel, at most
constexpr int kStreamThreads = 256;       // threads per block of the streaming kernels
constexpr int kColLanes = 32;             // kept (contiguous) columns per block of the column kernel
constexpr int kColWarps = 8;              // reduction slices per block of the column kernel
constexpr int kUnroll = 4;                // independent loads in flight per thread in streaming loops
constexpr int kColVecMax = 8;             // widest vector of columns_vec_kernel (2-byte types); workspaces fit it

// Values held per thread by the warp/block-per-row kernels: 24-32 registers of inputs, what fits the
// 64-register cap (full occupancy) without spilling (checked by test_codegen_norm_pool_nvcc.py; two inputs
// at 16 spilled with a bool mask's select in the prologue).
__host__ __device__ constexpr int big_vpt(int n_in) {
  return n_in == 1 ? 24 : n_in == 2 ? 12 : n_in <= 4 ? 8 : 4;
}

// The canonical problem a kernel sees, passed by value. Dims are canonical (outermost first).
template <int NIn>
struct View {
  int nd;          // canonical dims (>= 1)
  int nr;          // reduced canonical dims
  uint32_t rmask;  // bit d: canonical dim d is reduced
  int64_t K, R;    // kept / reduced element counts
  KfFastDiv div[KF_MAX_DIMS];
  int64_t kmul[KF_MAX_DIMS];  // weight of dim d in the kept linear index (0 for reduced dims)
  int64_t stride[NIn][KF_MAX_DIMS];
  int64_t ostride[KF_MAX_DIMS];
  // The innermost reduced dim: size divider, input and output strides; the next reduced dim outward: strides.
  // Held rows use them as the whole reduced index (nr <= 2, reduced dims innermost: group norm's [C/G, HW]).
  KfFastDiv rin;
  int64_t rs[NIn], rso[NIn];
  int64_t ors, orso;
  const void* in[NIn];
  void* out;
};

// Offsets of a kept index's first element (reduced coordinates 0).
template <int NIn>
__device__ __forceinline__ void kept_offsets(const View<NIn>& v, int64_t k, int64_t (&off)[NIn], int64_t& ooff) {
#pragma unroll
  for (int i = 0; i < NIn; ++i) off[i] = 0;
  ooff = 0;
#pragma unroll
  for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {
    if (d < v.nd && !((v.rmask >> d) & 1u)) {
      const int64_t c = v.div[d].peel(k);
#pragma unroll
      for (int i = 0; i < NIn; ++i) off[i] += c * v.stride[i][d];
      ooff += c * v.ostride[d];
    }
  }
}

// Adds the offsets of reduced linear index r to base offsets.
template <int NIn>
__device__ __forceinline__ void add_reduced_offsets(const View<NIn>& v, int64_t r, int64_t (&off)[NIn], int64_t& ooff) {
  if (v.nr == 1) {
#pragma unroll
    for (int i = 0; i < NIn; ++i) off[i] += r * v.rs[i];
    ooff += r * v.ors;
    return;
  }
#pragma unroll
  for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {
    if (d < v.nd && ((v.rmask >> d) & 1u)) {
      const int64_t c = v.div[d].peel(r);
#pragma unroll
      for (int i = 0; i < NIn; ++i) off[i] += c * v.stride[i][d];
      ooff += c * v.ostride[d];
    }
  }
}

template <class Op>
__device__ __forceinline__ float group_allreduce(float x, int group, Op op) {
  for (int o = group >> 1; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

// Every thread of the block gets the same value (each combines the per-warp values in the same order).
template <class Op>
__device__ __forceinline__ float block_allreduce(float x, float* scratch, Op op) {
  x = group_allreduce(x, 32, op);
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if ((threadIdx.x & 31) == 0) scratch[warp] = x;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < nwarps; ++w) r = op(r, scratch[w]);
  __syncthreads();  // scratch is reused by the next reduction
  return r;
}

struct SumOp {
  __device__ __forceinline__ float operator()(float x, float y) const { return x + y; }
};
template <class Stat>
struct R1MergeOp {
  __device__ __forceinline__ float operator()(float x, float y) const { return Stat::r1_merge(x, y); }
};

template <class Stat>
__device__ __forceinline__ KfStats shfl_down_stats(const KfStats& s, int o) {
  return {__shfl_down_sync(0xffffffffu, s.a, o), __shfl_down_sync(0xffffffffu, s.b, o),
          __shfl_down_sync(0xffffffffu, s.count, o)};
}

// Block-wide merge of streaming partials; the result is valid in thread 0 only.
template <class Stat>
__device__ __forceinline__ KfStats block_merge_to_first(KfStats s, KfStats* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = Stat::merge(s, shfl_down_stats<Stat>(s, o));
  const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  if ((threadIdx.x & 31) == 0) scratch[warp] = s;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < nwarps; ++w) s = Stat::merge(s, scratch[w]);
  __syncthreads();
  return s;
}

// ---------------------------------------------------------------------------------------------- kernels

// Offset of reduced index r within a held row (nr == 1: r * stride; nr == 2: split r by the inner size).
template <int NIn>
struct RowPos {
  int64_t q, c;
  __device__ __forceinline__ RowPos(const View<NIn>& v, int64_t r) {
    if (v.nr == 1) {
      q = 0;
      c = r;
    } else {
      q = int64_t(v.rin.div(uint64_t(r)));
      c = r - q * int64_t(v.rin.d);
    }
  }
  __device__ __forceinline__ int64_t in(const View<NIn>& v, int i) const { return q * v.rso[i] + c * v.rs[i]; }
  __device__ __forceinline__ int64_t out(const View<NIn>& v) const { return q * v.orso + c * v.ors; }
};

// One pass over register-resident rows: the reduced dims are the innermost one or two (RowPos). kBlockRow: a block per row (threadIdx.x is the lane); otherwise a group of 2^group_log2 lanes
// per row, several rows per warp. Slot j of a lane holds reduced index lane + j * group, so a warp's loads
// are contiguous along the row.
template <class Pro, class Stat, class Apply, int kVPT, bool kBlockRow, typename TOut, typename... TIn>
__global__ void __launch_bounds__(kBlockRow ? kMaxBlockRowThreads : kGroupThreads, kBlockRow ? 1 : kMinGroupBlocks)
rows_resident_kernel(const View<sizeof...(TIn)> v, const int group_log2, const KfScalars sc, KfStats* stats_out) {
  constexpr int NIn = sizeof...(TIn);
  __shared__ float scratch[32];
  const Pro pro;
  const Apply apply;
  const int group = kBlockRow ? int(blockDim.x) : (1 << group_log2);
  const int lane = kBlockRow ? int(threadIdx.x) : int(threadIdx.x & (group - 1));
  // Rows advance per warp (kBlockRow: per block) so shuffles and barriers always see every thread.
  const int64_t rows_per_step = kBlockRow ? int64_t(gridDim.x) : (int64_t(gridDim.x) * blockDim.x) >> group_log2;
  const int64_t first_row = kBlockRow ? int64_t(blockIdx.x)
                                      : ((int64_t(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u)) >> group_log2);
  const int row_in_warp = kBlockRow ? 0 : int(threadIdx.x & 31) >> group_log2;

  for (int64_t row0 = first_row; row0 < v.K; row0 += rows_per_step) {
    const int64_t row = row0 + row_in_warp;
    const bool row_ok = row < v.K;
    int64_t base[NIn], obase;
    kept_offsets(v, row_ok ? row : 0, base, obase);
    // Slots j < held are inside the row (a 32-bit count keeps the per-slot test cheap).
    const int held = row_ok && lane < v.R ? int((v.R - lane + group - 1) / group) : 0;

    float x[kVPT][NIn];
#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      const int64_t r = lane + int64_t(j) * group;
      if (j < held) {
        const RowPos<NIn> pos(v, r);
        int64_t off[NIn];
#pragma unroll
        for (int i = 0; i < NIn; ++i) off[i] = base[i] + pos.in(v, i);
        KfLoadPack<0, TIn...>::load(x[j], v.in, off);
      } else {
#pragma unroll
        for (int i = 0; i < NIn; ++i) x[j][i] = 0.f;
      }
    }

    // Pass 1 over the held values: max (softmax) or sum (mean, mean square). v = Pro(x) is held from here on
    // (as rows_vec_kernel holds it): the inputs stay live only where Apply reads them, and a prologue is
    // computed once, not once per pass (a select's compare kept beside x spilled at kVPT = 24).
    float val[kVPT];
    float acc = Stat::r1_init();
#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      val[j] = j < held ? pro(x[j], sc) : 0.f;
      if (j < held) acc = Stat::r1_push(acc, val[j]);
    }
    acc = kBlockRow ? block_allreduce(acc, scratch, R1MergeOp<Stat>()) : group_allreduce(acc, group, R1MergeOp<Stat>());
    KfStats s;
    s.count = float(v.R);
    s.a = Stat::r1_final(acc, s.count);
    s.b = 0.f;
    // Pass 2: sum of exp(v - max) or of squared deviations from the exact mean.
    if (Stat::kResidentSecondPass) {
      float acc2 = 0.f;
#pragma unroll
      for (int j = 0; j < kVPT; ++j)
        if (j < held) acc2 += Stat::r2_term(val[j], s.a);
      s.b = kBlockRow ? block_allreduce(acc2, scratch, SumOp()) : group_allreduce(acc2, group, SumOp());
    }
    if (stats_out != nullptr && row_ok && lane == 0) stats_out[row] = s;

#pragma unroll
    for (int j = 0; j < kVPT; ++j) {
      const int64_t r = lane + int64_t(j) * group;
      if (j < held) kf_store<TOut>(v.out, obase + RowPos<NIn>(v, r).out(v), apply(val[j], s, x[j], sc));
    }
  }
}


// Rows read in 16-byte vectors: the single reduced dim is innermost with unit stride (or broadcast) in every
// input and the output. Each thread holds kSlots vectors of v = Pro(x) in registers (x is read from DRAM once);
// `threads_per_row` threads share a row (up to 32: several rows per block, shuffles only; more: one row per
// block, one shared-memory step per statistic). The apply pass reloads only the inputs Apply itself reads (the compiler
// drops the other loads): per-column parameters, residuals of a fused epilogue.
// !kEdges: every row is whole aligned vectors (rows_vectorizable). kEdges: any row length and start, the
// operands that move along the row co-aligned (rows_coaligned): vectors start at the output row's first 16-byte
// boundary; the `head` elements before it and the `tail` after the last whole vector (at most 2 * (kVec - 1))
// are one element each of threads t < head + tail (a warp or more per row), held in one more register and reduced and applied with the
// vectors. This is PyTorch softmax's aligned shift: odd rows keep the vector loads instead of scalar ones.
// 512 threads at most: 32 held values plus the vectors in flight need more than the 64 registers a
// 1024-thread bound leaves (they spilled).
constexpr int kVecRowThreads = 512;

// Rows above kVecRowThreads * 32 values (16K: a 32000-word vocabulary's log_softmax, a row of 16385) held too: 64
// values per thread (48 for rows that are not whole aligned vectors: 24K), one 512-thread block per row and per SM at up to 128 registers, x still read once. Without
// it such rows took the scalar block-per-row kernel (x read once, scalar loads, a third of the SM's threads). An
// extra instantiation of rows_vec_kernel, so only a region whose captured rows are that long asks for it
// (`static constexpr bool kLongRows = true;` in its Pro functor); other lengths never reach it.
template <class Pro, class = void>
struct kf_long_rows : std::false_type {};
template <class Pro>
struct kf_long_rows<Pro, std::void_t<decltype(Pro::kLongRows)>> : std::bool_constant<Pro::kLongRows> {};
constexpr int kLongRowValues = 64;
constexpr int kLongEdgeRowValues = 48;  // with the edge elements' registers 64 spilled 88 bytes (fp32, one input)

// Inputs of a held row's edge element r (rows_vec_kernel<kEdges>): scalar loads, broadcast inputs at r = 0.
template <typename... TIn>
__device__ __forceinline__ void load_edge(const View<sizeof...(TIn)>& v, const int64_t (&base)[sizeof...(TIn)], int r,
                                          float (&x)[sizeof...(TIn)]) {
  int64_t off[sizeof...(TIn)];
#pragma unroll
  for (int i = 0; i < int(sizeof...(TIn)); ++i) off[i] = base[i] + (v.rs[i] != 0 ? r : 0);
  KfLoadPack<0, TIn...>::load(x, v.in, off);
}

template <class Pro, class Stat, class Apply, int kVec, int kSlots, bool kEdges, typename TOut, typename... TIn>
__global__ void __launch_bounds__(kVecRowThreads)
rows_vec_kernel(const View<sizeof...(TIn)> v, const int threads_per_row, const KfScalars sc, KfStats* stats_out) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kAlign = int(16 / sizeof(TOut));  // output elements per 16 bytes; kVec is a multiple
  __shared__ float scratch[32];
  const Pro pro;
  const Apply apply;
  const bool in_warp = threads_per_row <= 32;  // shuffles only; else one row per block
  const int rows_per_block = in_warp ? int(blockDim.x) / threads_per_row : 1;
  const int slot = in_warp ? int(threadIdx.x) / threads_per_row : 0;
  const int t = int(threadIdx.x) - slot * threads_per_row;
  const int64_t row_step = int64_t(gridDim.x) * rows_per_block;
  const int64_t first = int64_t(blockIdx.x) * rows_per_block + slot;
  const int64_t whole_vecs = v.R / kVec;
  for (int64_t row = first; row - slot < v.K; row += row_step) {
    const bool row_ok = row < v.K;  // every warp of a block-row reaches the barriers
    int64_t base[NIn], obase;
    kept_offsets(v, row_ok ? row : 0, base, obase);
    // Vector q starts at element vec0 + q * kVec; edge_r is this thread's edge element (32-bit: R <= 16K).
    int64_t vec0 = 0, n_vec = whole_vecs;
    int edge_r = 0;
    bool has_edge = false;
    if constexpr (kEdges) {
      const int mis = int((reinterpret_cast<uintptr_t>(v.out) / sizeof(TOut) + uint64_t(obase)) % kAlign);
      const int head = (kAlign - mis) % kAlign, nv = (int(v.R) - head) / kVec;
      vec0 = head;
      n_vec = nv;
      has_edge = row_ok && t < int(v.R) - nv * kVec;
      edge_r = t < head ? t : t + nv * kVec;
    }
    float val[kSlots][kVec];
    float val_e = 0.f;
    float acc = Stat::r1_init();
    if constexpr (kEdges) {
      if (has_edge) {
        float xe[NIn];
        load_edge<TIn...>(v, base, edge_r, xe);
        val_e = pro(xe, sc);
        acc = Stat::r1_push(acc, val_e);
      }
    }
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int64_t q = int64_t(j) * threads_per_row + t;
      if (row_ok && q < n_vec) {
        float xin[NIn][kVec];
        KfVecPack<0, kVec, TIn...>::load(xin, v.in, base, v.rs, vec0 + q * kVec);
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float xe[NIn];
#pragma unroll
          for (int i = 0; i < NIn; ++i) xe[i] = xin[i][e];
          val[j][e] = pro(xe, sc);
          acc = Stat::r1_push(acc, val[j][e]);
        }
      }
    }
    acc = in_warp ? group_allreduce(acc, threads_per_row, R1MergeOp<Stat>())
                  : block_allreduce(acc, scratch, R1MergeOp<Stat>());
    KfStats s;
    s.count = float(v.R);
    s.a = Stat::r1_final(acc, s.count);
    s.b = 0.f;
    if (Stat::kResidentSecondPass) {
      float acc2 = 0.f;
      if (kEdges && has_edge) acc2 += Stat::r2_term(val_e, s.a);
#pragma unroll
      for (int j = 0; j < kSlots; ++j) {
        const int64_t q = int64_t(j) * threads_per_row + t;
        if (row_ok && q < n_vec) {
#pragma unroll
          for (int e = 0; e < kVec; ++e) acc2 += Stat::r2_term(val[j][e], s.a);
        }
      }
      s.b = in_warp ? group_allreduce(acc2, threads_per_row, SumOp()) : block_allreduce(acc2, scratch, SumOp());
    }
    if (stats_out != nullptr && row_ok && t == 0) stats_out[row] = s;
    if constexpr (kEdges) {
      if (has_edge) {
        float xe[NIn];
        load_edge<TIn...>(v, base, edge_r, xe);
        kf_store<TOut>(v.out, obase + edge_r, apply(val_e, s, xe, sc));
      }
    }
#pragma unroll
    for (int j = 0; j < kSlots; ++j) {
      const int64_t q = int64_t(j) * threads_per_row + t;
      if (row_ok && q < n_vec) {
        float xin[NIn][kVec];
        KfVecPack<0, kVec, TIn...>::load(xin, v.in, base, v.rs, vec0 + q * kVec);
        float y[kVec];
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float xe[NIn];
#pragma unroll
          for (int i = 0; i < NIn; ++i) xe[i] = xin[i][e];
          y[e] = apply(val[j][e], s, xe, sc);
        }
        kf_store_vec<TOut, kVec>(v.out, obase + vec0 + q * kVec, y);
      }
    }
  }
}

// Thread 0 of a streaming block stores its merged statistics: final ones (kept index k) when the reduction
// has one split, else the partial of block b for finalize_kernel.
template <class Stat>
__device__ __forceinline__ void store_partial(KfStats s, int64_t splits, int64_t R, int64_t k, int64_t b,
                                              KfStats* partial, KfStats* stats, KfStats* stats_out) {
  if (threadIdx.x != 0) return;
  if (splits > 1) {
    partial[b] = s;
    return;
  }
  Stat::finalize(s);
  s.count = float(R);
  stats[k] = s;
  if (stats_out != nullptr) stats_out[k] = s;
}

// Streaming partial statistics of (kept index, split) pairs, threads along the reduced index (contiguous
// when the innermost dim is reduced). With one split the result is final and goes straight to `stats`.
template <class Pro, class Stat, typename... TIn>
__global__ void __launch_bounds__(kStreamThreads)
row_partial_kernel(const View<sizeof...(TIn)> v, const KfFastDiv splits_div, const KfScalars sc, KfStats* partial,
                   KfStats* stats, KfStats* stats_out) {
  constexpr int NIn = sizeof...(TIn);
  __shared__ KfStats scratch[kStreamThreads / 32];
  const Pro pro;
  const int64_t splits = int64_t(splits_div.d);
  const int64_t chunk = (v.R + splits - 1) / splits;
  for (int64_t b = blockIdx.x; b < v.K * splits; b += gridDim.x) {
    int64_t k = b;
    const int64_t split = splits_div.peel(k);
    const int64_t begin = split * chunk, end = begin + chunk < v.R ? begin + chunk : v.R;
    int64_t base[NIn], obase;
    kept_offsets(v, k, base, obase);
    KfStats s = Stat::identity();
    for (int64_t r0 = begin + threadIdx.x; r0 < end; r0 += int64_t(kUnroll) * blockDim.x) {
      float x[kUnroll][NIn];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t r = r0 + int64_t(u) * blockDim.x;
        if (r < end) {
          int64_t off[NIn], ooff = 0;
#pragma unroll
          for (int i = 0; i < NIn; ++i) off[i] = base[i];
          add_reduced_offsets(v, r, off, ooff);
          KfLoadPack<0, TIn...>::load(x[u], v.in, off);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (r0 + int64_t(u) * blockDim.x < end) Stat::push(s, pro(x[u], sc));
    }
    store_partial<Stat>(block_merge_to_first<Stat>(s, scratch), splits, v.R, k, b, partial, stats, stats_out);
  }
}

// A vector's values into a statistic: together when the policy can take them so (Welford: one divide).
template <class Stat, int K>
__device__ __forceinline__ void push_vector(KfStats& s, const float (&v)[K]) {
  if constexpr (KfHasPushVec<Stat>::value) {
    Stat::template push_vec<K>(s, v);
  } else {
#pragma unroll
    for (int j = 0; j < K; ++j) Stat::push(s, v[j]);
  }
}

// A loaded vector of every input (x[i][e]) through the prologue into a statistic.
template <class Stat, class Pro, int NIn, int kVec>
__device__ __forceinline__ void push_prologue(KfStats& s, const Pro& pro, const float (&x)[NIn][kVec],
                                              const KfScalars& sc) {
  float pv[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    float xe[NIn];
#pragma unroll
    for (int i = 0; i < NIn; ++i) xe[i] = x[i][e];
    pv[e] = pro(xe, sc);
  }
  push_vector<Stat>(s, pv);
}

// row_partial_kernel with kVec-wide loads, for an innermost reduced dim that every input reads contiguously
// (or broadcasts) and whose length is a multiple of kVec (inner_vectorizable): offsets are computed once per
// vector instead of per element, which is what bounds the scalar kernel on long strided reductions (batch
// norm's N x HW per channel). Two vectors in flight per thread.
// The blocks-per-SM bound is ptxas's register target once the 2 * NIn * kVec held values pass 32: left to itself
// ptxas stopped at 64 registers and spilled 4 bytes at eight fp32 inputs (a conv-anchored group norm behind four
// per-channel operands, its weight and bias). Up to 16 the thread count alone (0: no bound; 1 is one, which moves
// ptxas's choice).
template <int NIn, int kVec>
constexpr int kf_row_partial_vec_min_blocks() { return NIn * kVec <= 16 ? 0 : NIn * kVec <= 28 ? 3 : 2; }

template <class Pro, class Stat, int kVec, typename... TIn>
__global__ void __launch_bounds__(kStreamThreads, kf_row_partial_vec_min_blocks<sizeof...(TIn), kVec>())
row_partial_vec_kernel(const View<sizeof...(TIn)> v, const KfFastDiv splits_div, const KfScalars sc,
                       KfStats* partial, KfStats* stats, KfStats* stats_out) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kU = 2;
  __shared__ KfStats scratch[kStreamThreads / 32];
  const Pro pro;
  const int64_t splits = int64_t(splits_div.d);
  const int64_t n_vec = v.R / kVec;
  const int64_t chunk = (n_vec + splits - 1) / splits;
  for (int64_t b = blockIdx.x; b < v.K * splits; b += gridDim.x) {
    int64_t k = b;
    const int64_t split = splits_div.peel(k);
    const int64_t begin = split * chunk, end = begin + chunk < n_vec ? begin + chunk : n_vec;
    int64_t base[NIn], obase;
    kept_offsets(v, k, base, obase);
    KfStats s = Stat::identity();
    for (int64_t q0 = begin + threadIdx.x; q0 < end; q0 += int64_t(kU) * blockDim.x) {
      float xin[kU][NIn][kVec];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t q = q0 + int64_t(u) * blockDim.x;
        if (q < end) {
          int64_t off[NIn], ooff = 0;
#pragma unroll
          for (int i = 0; i < NIn; ++i) off[i] = base[i];
          add_reduced_offsets(v, q * kVec, off, ooff);
          KfVecPack<0, kVec, TIn...>::load(xin[u], v.in, off, v.rs, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < kU; ++u)
        if (q0 + int64_t(u) * blockDim.x < end) push_prologue<Stat>(s, pro, xin[u], sc);
    }
    store_partial<Stat>(block_merge_to_first<Stat>(s, scratch), splits, v.R, k, b, partial, stats, stats_out);
  }
}

// row_partial_vec_kernel for long innermost rows (group norm's H*W per channel of a group, instance and batch
// norm's H*W): a block walks its split one row of the innermost dim at a time, computing the row's offsets once
// and reading every input constant along it (per-channel parameters) once, so a vector costs its moving inputs'
// loads and the math. Per vector, row_partial_vec_kernel's index split and NIn 64-bit multiply-adds made it
// compute-bound behind per-channel operands (1.55 TB/s on a conv -> bias -> scale -> sigmoid -> group norm).
template <class Pro, class Stat, int kVec, typename... TIn>
__global__ void __launch_bounds__(kStreamThreads, kf_row_partial_vec_min_blocks<sizeof...(TIn), kVec>())
row_partial_plane_kernel(const View<sizeof...(TIn)> v, const KfFastDiv splits_div, const KfScalars sc,
                         KfStats* partial, KfStats* stats, KfStats* stats_out) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kU = 2;
  __shared__ KfStats scratch[kStreamThreads / 32];
  const Pro pro;
  const int64_t splits = int64_t(splits_div.d);
  const int64_t row_vecs = int64_t(v.rin.d) / kVec;
  const int64_t n_vec = v.R / kVec;
  const int64_t chunk = (n_vec + splits - 1) / splits;
  for (int64_t b = blockIdx.x; b < v.K * splits; b += gridDim.x) {
    int64_t k = b;
    const int64_t split = splits_div.peel(k);
    const int64_t begin = split * chunk, end = begin + chunk < n_vec ? begin + chunk : n_vec;
    int64_t kbase[NIn], obase;
    kept_offsets(v, k, kbase, obase);
    KfStats s = Stat::identity();
    for (int64_t lo = begin; lo < end;) {
      const int64_t row = lo / row_vecs;
      const int64_t row_end = (row + 1) * row_vecs < end ? (row + 1) * row_vecs : end;
      int64_t base[NIn], ooff = 0;
#pragma unroll
      for (int i = 0; i < NIn; ++i) base[i] = kbase[i];
      add_reduced_offsets(v, row * row_vecs * kVec, base, ooff);
      float fixed[NIn];
      KfLoadPack<0, TIn...>::load(fixed, v.in, base);
      const int64_t first = (lo - row * row_vecs) * kVec;  // the row's element the segment starts at
      const int64_t count = row_end - lo;
      for (int64_t q0 = threadIdx.x; q0 < count; q0 += int64_t(kU) * blockDim.x) {
        float xin[kU][NIn][kVec];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int64_t q = q0 + int64_t(u) * blockDim.x;
          if (q < count) KfRowPack<0, kVec, TIn...>::load(xin[u], v.in, base, v.rs, first + q * kVec, fixed);
        }
#pragma unroll
        for (int u = 0; u < kU; ++u)
          if (q0 + int64_t(u) * blockDim.x < count) push_prologue<Stat>(s, pro, xin[u], sc);
      }
      lo = row_end;
    }
    store_partial<Stat>(block_merge_to_first<Stat>(s, scratch), splits, v.R, k, b, partial, stats, stats_out);
  }
}

// Columns: lane tx owns kept index k (consecutive k are the contiguous inner kept dim), warp ty walks the
// reduced indices ty, ty + 8, ... of the block's split. With one split the block has every value of its
// columns: it merges the 8 partials (every thread, same order), then applies — or, given `stats_only`, stores
// the statistics there and applies nothing. Otherwise it writes partials.
// The blocks-per-SM bound is a register target for ptxas, sized to the inputs each thread holds kUnroll of:
// without one, an fp16 input with a second operand read only by the apply (softmax(x, dtype=float32) * w) came
// out at 48 registers with a 4-byte spill; a flat 64-register target spilled 28 bytes at four inputs (a bool
// mask, two operands), which need ~72. One or two inputs keep the 4 blocks they had at ~52 registers.
template <int NIn>
constexpr int kf_columns_min_blocks() { return NIn <= 2 ? 4 : NIn <= 4 ? 3 : 2; }

template <class Pro, class Stat, class Apply, typename TOut, typename... TIn>
__global__ void __launch_bounds__(kColLanes * kColWarps, kf_columns_min_blocks<sizeof...(TIn)>())
columns_kernel(const View<sizeof...(TIn)> v, const int splits, const KfScalars sc, KfStats* partial,
               KfStats* stats_out, KfStats* stats_only) {
  constexpr int NIn = sizeof...(TIn);
  __shared__ KfStats scratch[kColWarps][kColLanes];
  const Pro pro;
  const Apply apply;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t chunk = (v.R + splits - 1) / splits;
  const int64_t begin = int64_t(blockIdx.y) * chunk, end = begin + chunk < v.R ? begin + chunk : v.R;
  const int64_t kblocks = (v.K + kColLanes - 1) / kColLanes;

  for (int64_t kb = blockIdx.x; kb < kblocks; kb += gridDim.x) {
    const int64_t k = kb * kColLanes + tx;
    const bool k_ok = k < v.K;
    int64_t base[NIn], obase;
    kept_offsets(v, k_ok ? k : 0, base, obase);

    KfStats s = Stat::identity();
    if (k_ok) {
      for (int64_t r0 = begin + ty; r0 < end; r0 += int64_t(kUnroll) * kColWarps) {
        float x[kUnroll][NIn];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t r = r0 + int64_t(u) * kColWarps;
          if (r < end) {
            int64_t off[NIn], ooff = 0;
#pragma unroll
            for (int i = 0; i < NIn; ++i) off[i] = base[i];
            add_reduced_offsets(v, r, off, ooff);
            KfLoadPack<0, TIn...>::load(x[u], v.in, off);
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          if (r0 + int64_t(u) * kColWarps < end) Stat::push(s, pro(x[u], sc));
      }
    }
    scratch[ty][tx] = s;
    __syncthreads();
    s = scratch[0][tx];
    for (int w = 1; w < kColWarps; ++w) s = Stat::merge(s, scratch[w][tx]);
    __syncthreads();  // scratch is rewritten by the next column block

    if (splits > 1) {
      if (ty == 0 && k_ok) partial[k * splits + blockIdx.y] = s;
      continue;
    }
    Stat::finalize(s);
    s.count = float(v.R);
    if (ty == 0 && k_ok && stats_out != nullptr) stats_out[k] = s;
    if (stats_only != nullptr) {
      if (ty == 0 && k_ok) stats_only[k] = s;
      continue;
    }
    if (!k_ok) continue;
    // Apply: the block's columns were just read, so this second read is served mostly by L2.
    for (int64_t r0 = ty; r0 < v.R; r0 += int64_t(kUnroll) * kColWarps) {
      float x[kUnroll][NIn];
      int64_t oo[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t r = r0 + int64_t(u) * kColWarps;
        if (r < v.R) {
          int64_t off[NIn];
          oo[u] = obase;
#pragma unroll
          for (int i = 0; i < NIn; ++i) off[i] = base[i];
          add_reduced_offsets(v, r, off, oo[u]);
          KfLoadPack<0, TIn...>::load(x[u], v.in, off);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (r0 + int64_t(u) * kColWarps < v.R) kf_store<TOut>(v.out, oo[u], apply(pro(x[u], sc), s, x[u], sc));
    }
  }
}

// columns_kernel with kVec adjacent columns per lane, for a contiguous inner kept dim (inner_vectorizable): a
// warp reads 32 x 16 bytes of a row per load instead of 32 elements. The scalar kernel's few bytes in flight per
// thread bound it by latency (fp16 group norm statistics: 64-byte warp loads, 0.34 TB/s). Same partials and
// statistics as columns_kernel, column by column, so either may serve a launch. Partials or statistics only:
// fused with the apply (one split) it measured no faster than columns_kernel (F.normalize over channels,
// 0.302 vs 0.291 ms), the second read from L2 bounding both.
// Its blocks-per-SM bound is a register target too: 3 (85 registers) spilled 8 bytes at seven fp32 inputs and
// 100 at eight (conv-anchored group norms behind per-channel operands); from six on a thread gets 128.
template <int NIn, int kVec>
constexpr int kf_columns_vec_min_blocks() { return NIn * kVec <= 20 ? 3 : 2; }

template <class Pro, class Stat, int kVec, typename... TIn>
__global__ void __launch_bounds__(kColLanes * kColWarps, kf_columns_vec_min_blocks<sizeof...(TIn), kVec>())
columns_vec_kernel(const View<sizeof...(TIn)> v, const int splits, const KfScalars sc, KfStats* partial,
                   KfStats* stats_out, KfStats* stats_only) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kU = 2;
  __shared__ KfStats scratch[kColWarps][kColLanes];
  const Pro pro;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t chunk = (v.R + splits - 1) / splits;
  const int64_t begin = int64_t(blockIdx.y) * chunk, end = begin + chunk < v.R ? begin + chunk : v.R;
  const int64_t n_vec = v.K / kVec;
  // Fewer column vectors than lanes (a conv's 64 fp32 channels are 16 vectors): the lanes split into groups
  // over the same columns, each group reading other rows, so no lane idles and twice or more the bytes are in
  // flight. Row slices are numbered (warp, group) and merged in that order: deterministic. Vectors of 8 (16-bit
  // types) keep one group: their kernels sit at the register bound, and the grouping's indices spilled there.
  int lanes = kVec > 4 ? kColLanes : 1;
  while (lanes < kColLanes && lanes < n_vec) lanes <<= 1;
  const int groups = kColLanes / lanes;
  const int col = kVec > 4 ? tx : tx & (lanes - 1), grp = kVec > 4 ? 0 : tx / lanes;
  const int slice = ty * groups + grp, slices = kColWarps * groups;
  const int64_t kblocks = (n_vec + lanes - 1) / lanes;
  int64_t inner_stride[NIn];
#pragma unroll
  for (int i = 0; i < NIn; ++i) inner_stride[i] = v.stride[i][v.nd - 1];

  for (int64_t kb = blockIdx.x; kb < kblocks; kb += gridDim.x) {
    const int64_t q = kb * lanes + col;
    const bool k_ok = q < n_vec;
    const int64_t k0 = (k_ok ? q : 0) * kVec;
    int64_t base[NIn], obase;
    kept_offsets(v, k0, base, obase);

    KfStats s[kVec];
#pragma unroll
    for (int e = 0; e < kVec; ++e) s[e] = Stat::identity();
    if (k_ok) {
      for (int64_t r0 = begin + slice; r0 < end; r0 += int64_t(kU) * slices) {
        float x[kU][NIn][kVec];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const int64_t r = r0 + int64_t(u) * slices;
          if (r < end) {
            int64_t off[NIn], ooff = 0;
#pragma unroll
            for (int i = 0; i < NIn; ++i) off[i] = base[i];
            add_reduced_offsets(v, r, off, ooff);
            KfVecPack<0, kVec, TIn...>::load(x[u], v.in, off, inner_stride, 0);
          }
        }
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          if (r0 + int64_t(u) * slices >= end) continue;
#pragma unroll
          for (int e = 0; e < kVec; ++e) {
            float xe[NIn];
#pragma unroll
            for (int i = 0; i < NIn; ++i) xe[i] = x[u][i][e];
            Stat::push(s[e], pro(xe, sc));
          }
        }
      }
    }
    // The row slices' partials of each column merged in slice order (every thread, as columns_kernel does).
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      scratch[ty][tx] = s[e];
      __syncthreads();
      KfStats m = scratch[0][col];
      if constexpr (kVec > 4) {
        for (int w = 1; w < kColWarps; ++w) m = Stat::merge(m, scratch[w][tx]);
      } else {
#pragma unroll 1
        for (int t = 1; t < slices; ++t) m = Stat::merge(m, (&scratch[0][0])[t * lanes + col]);  // [w][g*lanes+col]
      }
      s[e] = m;
      __syncthreads();
    }

    const bool lead = ty == 0 && grp == 0 && k_ok;  // one lane writes each column
    if (splits > 1) {
      if (lead)
#pragma unroll
        for (int e = 0; e < kVec; ++e) partial[(k0 + e) * splits + blockIdx.y] = s[e];
      continue;
    }
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      Stat::finalize(s[e]);
      s[e].count = float(v.R);
      if (lead && stats_out != nullptr) stats_out[k0 + e] = s[e];
      if (lead && stats_only != nullptr) stats_only[k0 + e] = s[e];
    }

  }
}

// Merges each kept index's split partials in split order (deterministic) into its final statistics.
template <class Stat>
__global__ void __launch_bounds__(kStreamThreads)
finalize_kernel(const int64_t K, const int64_t splits, const float count, const KfStats* partial, KfStats* stats,
                KfStats* stats_out) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < K; k += int64_t(gridDim.x) * blockDim.x) {
    KfStats s = partial[k * splits];
    for (int64_t p = 1; p < splits; ++p) s = Stat::merge(s, partial[k * splits + p]);
    Stat::finalize(s);
    s.count = count;
    stats[k] = s;
    if (stats_out != nullptr) stats_out[k] = s;
  }
}

// finalize_kernel for many splits of few kept indices (BatchNorm's 64 channels over 500 splits): a thread per
// kept index would walk its splits one dependent merge at a time. A block per kept index instead: thread t
// merges splits t, t + 256, ... in order, then the block's fixed shuffle tree (deterministic as well).
template <class Stat>
__global__ void __launch_bounds__(kStreamThreads)
finalize_wide_kernel(const int64_t K, const int64_t splits, const float count, const KfStats* partial,
                     KfStats* stats, KfStats* stats_out) {
  __shared__ KfStats scratch[kStreamThreads / 32];
  for (int64_t k = blockIdx.x; k < K; k += gridDim.x) {
    KfStats s = Stat::identity();
    for (int64_t p = threadIdx.x; p < splits; p += blockDim.x) s = Stat::merge(s, partial[k * splits + p]);
    s = block_merge_to_first<Stat>(s, scratch);
    if (threadIdx.x == 0) {
      Stat::finalize(s);
      s.count = count;
      stats[k] = s;
      if (stats_out != nullptr) stats_out[k] = s;
    }
  }
}

// Elements of apply_kernel's thread per loop step: with six inputs or more, four elements' loads and offsets
// spilled (seven fp32 inputs: 32 bytes at 64 registers).
template <int NIn>
__host__ __device__ constexpr int kf_apply_unroll() { return NIn >= 6 ? 2 : kUnroll; }

// Elementwise apply with finished statistics: element e (contiguous output order) -> coordinates -> input
// offsets and kept index. kf_apply_unroll elements per thread, a block-stride apart (coalesced).
template <class Pro, class Apply, typename TOut, typename... TIn>
__global__ void __launch_bounds__(kStreamThreads)
apply_kernel(const View<sizeof...(TIn)> v, const KfStats* stats, const KfScalars sc) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kU = kf_apply_unroll<NIn>();
  const Pro pro;
  const Apply apply;
  const int64_t total = v.K * v.R;
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kU;
  for (int64_t e0 = int64_t(blockIdx.x) * blockDim.x * kU + threadIdx.x; e0 < total; e0 += step) {
    float x[kU][NIn];
    int64_t kk[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t e = e0 + int64_t(u) * blockDim.x;
      if (e < total) {
        int64_t rest = e, off[NIn], k = 0;
#pragma unroll
        for (int i = 0; i < NIn; ++i) off[i] = 0;
#pragma unroll
        for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {
          if (d < v.nd) {
            const int64_t c = d == 0 ? rest : v.div[d].peel(rest);  // the outermost coordinate is what is left
#pragma unroll
            for (int i = 0; i < NIn; ++i) off[i] += c * v.stride[i][d];
            k += c * v.kmul[d];
          }
        }
        kk[u] = k;
        KfLoadPack<0, TIn...>::load(x[u], v.in, off);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t e = e0 + int64_t(u) * blockDim.x;
      if (e < total) kf_store<TOut>(v.out, e, apply(pro(x[u], sc), stats[kk[u]], x[u], sc));
    }
  }
}

// Element e of the contiguous output order: every input's offset of it, and its kept index (returned).
template <int NIn>
__device__ __forceinline__ int64_t element_offsets(const View<NIn>& v, int64_t e, int64_t (&off)[NIn]) {
  int64_t k = 0;
#pragma unroll
  for (int i = 0; i < NIn; ++i) off[i] = 0;
#pragma unroll
  for (int d = KF_MAX_DIMS - 1; d >= 0; --d) {
    if (d < v.nd) {
      const int64_t c = d == 0 ? e : v.div[d].peel(e);
#pragma unroll
      for (int i = 0; i < NIn; ++i) off[i] += c * v.stride[i][d];
      k += c * v.kmul[d];
    }
  }
  return k;
}

// apply_kernel with kVec-wide loads and stores (inner_vectorizable): a vector's elements share every
// coordinate but the innermost, so its offsets and kept index are computed once.
// The blocks-per-SM bound is ptxas's register target, sized to the kU * NIn * kVec input values a thread holds:
// left to itself ptxas chose 48 registers and spilled 8 bytes at three fp32 inputs (softmax(x / t) + b), while
// two and four took 58-62, and 16-bit inputs (kVec 8) 77 at three and 107 at four. The bound keeps those
// occupancies (4, 3, 2 blocks) and holds up to four fp32 inputs in 64 registers, seven in 85: five fp32 inputs
// fit 64 only with a light Apply (a conv-anchored group norm → elu/softplus/hardswish → + residual spilled
// 8-12 bytes there, round 13), so from five on a thread gets 85.
template <int NIn, int kVec>
constexpr int kf_apply_vec_min_blocks() { return NIn * kVec <= 16 ? 4 : NIn * kVec <= 28 ? 3 : 2; }

template <class Pro, class Apply, int kVec, typename TOut, typename... TIn>
__global__ void __launch_bounds__(kStreamThreads, kf_apply_vec_min_blocks<sizeof...(TIn), kVec>())
apply_vec_kernel(const View<sizeof...(TIn)> v, const KfStats* stats, const KfScalars sc) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kU = 2;
  const Pro pro;
  const Apply apply;
  const int inner = v.nd - 1;
  int64_t inner_stride[NIn];
#pragma unroll
  for (int i = 0; i < NIn; ++i) inner_stride[i] = v.stride[i][inner];
  const int64_t k_step = v.kmul[inner];  // 0 when the innermost dim is reduced
  const int64_t n_vec = v.K * v.R / kVec;
  const int64_t step = int64_t(gridDim.x) * blockDim.x * kU;
  for (int64_t q0 = int64_t(blockIdx.x) * blockDim.x * kU + threadIdx.x; q0 < n_vec; q0 += step) {
    float xin[kU][NIn][kVec];
    int64_t kk[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t q = q0 + int64_t(u) * blockDim.x;
      if (q < n_vec) {
        int64_t off[NIn];
        kk[u] = element_offsets(v, q * kVec, off);
        KfVecPack<0, kVec, TIn...>::load(xin[u], v.in, off, inner_stride, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t q = q0 + int64_t(u) * blockDim.x;
      if (q >= n_vec) continue;
      float y[kVec];
      if (k_step == 0) {
        // One kept index for the whole vector (BatchNorm's HW, a row's inner dim): one stats load, and the
        // compiler folds Apply's per-statistics math (a divide, an rsqrt) into one evaluation per vector —
        // per element it made this kernel compute-bound (ncu: SM 78%, DRAM 53%).
        const KfStats st = stats[kk[u]];
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float xe[NIn];
#pragma unroll
          for (int i = 0; i < NIn; ++i) xe[i] = xin[u][i][e];
          y[e] = apply(pro(xe, sc), st, xe, sc);
        }
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float xe[NIn];
#pragma unroll
          for (int i = 0; i < NIn; ++i) xe[i] = xin[u][i][e];
          y[e] = apply(pro(xe, sc), stats[kk[u] + e * k_step], xe, sc);
        }
      }
      kf_store_vec<TOut, kVec>(v.out, q * kVec, y);
    }
  }
}

// apply_vec_kernel for long innermost rows whose elements share one kept index (the innermost dim reduced: group,
// instance and batch norm over H*W, layer norm's rows): a block takes a chunk of one row, so the row's offsets,
// its statistics and every input constant along it (per-channel parameters) are read once per block, and a
// vector costs its moving inputs' loads and the math. Per vector, apply_vec_kernel's coordinates and NIn
// 64-bit multiply-adds per dim made it compute-bound behind per-channel operands (1.9 TB/s on a conv -> bias ->
// scale -> sigmoid -> group norm).
constexpr int kPlaneVecsPerThread = 8;

template <class Pro, class Apply, int kVec, typename TOut, typename... TIn>
__global__ void __launch_bounds__(kStreamThreads, kf_apply_vec_min_blocks<sizeof...(TIn), kVec>())
apply_plane_kernel(const View<sizeof...(TIn)> v, const KfStats* stats, const KfScalars sc, const KfFastDiv chunks_div) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kU = 2;
  const Pro pro;
  const Apply apply;
  const int64_t L = int64_t(v.div[v.nd - 1].d);
  const int64_t row_vecs = L / kVec;
  const int64_t chunk_vecs = int64_t(kStreamThreads) * kPlaneVecsPerThread;
  const int64_t blocks = v.K * v.R / L * int64_t(chunks_div.d);
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    int64_t row = b;
    const int64_t chunk = chunks_div.peel(row);
    int64_t base[NIn];
    const KfStats st = stats[element_offsets(v, row * L, base)];
    float fixed[NIn];
    KfLoadPack<0, TIn...>::load(fixed, v.in, base);
    const int64_t lo = chunk * chunk_vecs, hi = lo + chunk_vecs < row_vecs ? lo + chunk_vecs : row_vecs;
    for (int64_t q0 = lo + threadIdx.x; q0 < hi; q0 += int64_t(kU) * blockDim.x) {
      float xin[kU][NIn][kVec];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t q = q0 + int64_t(u) * blockDim.x;
        if (q < hi) KfRowPack<0, kVec, TIn...>::load(xin[u], v.in, base, v.rs, q * kVec, fixed);
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t q = q0 + int64_t(u) * blockDim.x;
        if (q >= hi) continue;
        float y[kVec];
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          float xe[NIn];
#pragma unroll
          for (int i = 0; i < NIn; ++i) xe[i] = xin[u][i][e];
          y[e] = apply(pro(xe, sc), st, xe, sc);
        }
        kf_store_vec<TOut, kVec>(v.out, row * L + q * kVec, y);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------- host side

// What the shape alone decides (shared by the workspace query and the launcher, so they agree).
struct Extent {
  bool ok;             // shape and mask valid
  int64_t K, R;        // kept / reduced counts
  bool reduced_inner;  // the innermost non-trivial dim is reduced (row family); else columns
};

inline Extent extent(const KfShape& shape, uint32_t mask) {
  Extent e{false, 1, 1, true};
  if (shape.ndim < 0 || shape.ndim > KF_MAX_DIMS) return e;
  if (shape.ndim < 32 && (mask >> shape.ndim) != 0u) return e;
  bool seen = false;
  for (int d = shape.ndim - 1; d >= 0; --d) {
    if (shape.size[d] < 0) return e;
    const bool reduced = (mask >> d) & 1u;
    (reduced ? e.R : e.K) *= shape.size[d];
    if (!seen && shape.size[d] != 1) {
      e.reduced_inner = reduced;
      seen = true;
    }
  }
  e.ok = true;
  return e;
}


struct SplitPlan {
  int64_t splits;
  size_t bytes;  // stats (K) + partials (K * splits when splits > 1)
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t clamp64(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : x > hi ? hi : x; }

// Splits of the reduction so that about 8 blocks per multiprocessor are busy, each with enough work; the column
// family's blocks cover `cols_per_block` kept columns (kColLanes, times the vector of columns_vec_kernel).
inline SplitPlan split_plan(const Extent& e, int sms, int64_t cols_per_block = kColLanes) {
  const int64_t target_blocks = int64_t(sms) * 8;
  SplitPlan p{1, 0};
  if (e.reduced_inner) {
    p.splits = clamp64(ceil_div(target_blocks, e.K), 1, ceil_div(e.R, 4096));
    // Whether rows are held depends on the inputs' strides too (reduced dims that do not merge take the
    // split path), which the workspace query does not see: the row family always reserves the stats.
    p.bytes = size_t(e.K) * (p.splits > 1 ? p.splits + 1 : 1) * sizeof(KfStats);
  } else {
    p.splits = clamp64(ceil_div(target_blocks, ceil_div(e.K, cols_per_block)), 1,
                       clamp64(ceil_div(e.R, kColWarps * 32), 1, 65535));
    if (p.splits > 1) p.bytes = size_t(e.K) * (p.splits + 1) * sizeof(KfStats);
  }
  return p;
}

// Canonicalises shape + strides into a View: size-1 dims dropped, same-kind neighbours merged where every
// input's strides line up (the output is contiguous, so it always does).
template <int NIn>
inline bool make_view(const KfShape& shape, uint32_t mask, const KfTensorRef* in, void* out, View<NIn>& v) {
  int64_t size[KF_MAX_DIMS], st[NIn][KF_MAX_DIMS], ost[KF_MAX_DIMS];
  bool red[KF_MAX_DIMS];
  int nd = 0;
  int64_t contiguous = 1;
  for (int d = shape.ndim - 1; d >= 0; --d) {  // innermost first, then reversed below
    const int64_t n = shape.size[d];
    if (n != 1) {
      size[nd] = n;
      red[nd] = (mask >> d) & 1u;
      ost[nd] = contiguous;
      for (int i = 0; i < NIn; ++i) st[i][nd] = in[i].stride[d];
      ++nd;
    }
    contiguous *= n;
  }
  // Merge outward: dim j (inner) with j + 1 (outer) when the outer is the inner's continuation everywhere.
  int m = 0;
  for (int j = 0; j < nd; ++j) {
    bool merge = m > 0 && red[j] == red[m - 1];
    for (int i = 0; merge && i < NIn; ++i) merge = st[i][j] == st[i][m - 1] * size[m - 1];
    if (merge) {
      size[m - 1] *= size[j];
      continue;
    }
    size[m] = size[j];
    red[m] = red[j];
    ost[m] = ost[j];
    for (int i = 0; i < NIn; ++i) st[i][m] = st[i][j];
    ++m;
  }
  if (m == 0) {  // every dim has size 1: one element, reduced over itself
    size[0] = 1;
    red[0] = true;
    ost[0] = 1;
    for (int i = 0; i < NIn; ++i) st[i][0] = 0;
    m = 1;
  }
  v.nd = m;
  v.nr = 0;
  v.rmask = 0;
  v.K = v.R = 1;
  int64_t kweight = 1;
  for (int j = 0; j < m; ++j) {  // j = 0 is innermost; canonical dim index d = m - 1 - j
    const int d = m - 1 - j;
    v.div[d] = KfFastDiv::make(uint64_t(size[j]));
    v.ostride[d] = ost[j];
    for (int i = 0; i < NIn; ++i) v.stride[i][d] = st[i][j];
    if (red[j]) {
      v.rmask |= 1u << d;
      v.R *= size[j];
      v.kmul[d] = 0;
      if (v.nr == 0) {
        v.rin = KfFastDiv::make(uint64_t(size[j]));
        for (int i = 0; i < NIn; ++i) v.rs[i] = st[i][j];
        v.ors = ost[j];
      } else if (v.nr == 1) {
        for (int i = 0; i < NIn; ++i) v.rso[i] = st[i][j];
        v.orso = ost[j];
      }
      ++v.nr;
    } else {
      v.kmul[d] = kweight;
      kweight *= size[j];
      v.K *= size[j];
    }
  }
  for (int d = m; d < KF_MAX_DIMS; ++d) {
    v.div[d] = KfFastDiv::make(1);
    v.kmul[d] = 0;
    v.ostride[d] = 0;
    for (int i = 0; i < NIn; ++i) v.stride[i][d] = 0;
  }
  if (v.nr < 2) {
    for (int i = 0; i < NIn; ++i) v.rso[i] = 0;
    v.orso = 0;
  }
  for (int i = 0; i < NIn; ++i) v.in[i] = in[i].data;
  v.out = out;
  return true;
}

// Whether rows_vec_kernel<kEdges = false> can read and write these rows in whole aligned kVec-wide vectors.
template <int kVec, int NIn>
inline bool rows_vectorizable(const View<NIn>& v, const KfTensorRef* in, void* out, size_t out_size,
                              std::initializer_list<size_t> in_sizes) {
  if (v.nr != 1 || v.ors != 1 || v.R % kVec != 0) return false;
  if (reinterpret_cast<uintptr_t>(out) % 16 != 0) return false;
  for (int d = 0; d < v.nd; ++d)
    if (!((v.rmask >> d) & 1u) && v.ostride[d] % kVec != 0) return false;
  int i = 0;
  for (size_t size : in_sizes) {
    if (v.rs[i] != 0 && v.rs[i] != 1) return false;
    if (v.rs[i] == 1) {
      if (reinterpret_cast<uintptr_t>(in[i].data) % 16 != 0) return false;
      for (int d = 0; d < v.nd; ++d)
        if (!((v.rmask >> d) & 1u) && v.stride[i][d] % kVec != 0) return false;
    }
    (void)size;
    ++i;
  }
  (void)out_size;
  return true;
}

// Whether rows_vec_kernel<kEdges = true> can take these rows (any length, any start): its vectors start at the
// output row's first 16-byte boundary, so every operand that moves along the row (row stride 1) must have the
// output's element size and put element e of every row at the output's address mod 16: base addresses congruent
// mod 16 and kept strides congruent mod the elements of 16 bytes. Broadcast operands (row stride 0) load one
// element and need nothing. A per-column parameter (kept strides 0) is co-aligned only when the row length is
// whole 16-byte words, which rows_vectorizable already takes.
template <int NIn>
inline bool rows_coaligned(const View<NIn>& v, const KfTensorRef* in, const void* out, size_t out_size,
                           std::initializer_list<size_t> in_sizes) {
  if (v.nr != 1 || v.ors != 1 || out_size == 0 || 16 % out_size != 0) return false;
  const uintptr_t out_addr = reinterpret_cast<uintptr_t>(out);
  if (out_addr % out_size != 0) return false;
  const int64_t align = int64_t(16 / out_size);
  int i = 0;
  for (size_t size : in_sizes) {
    if (v.rs[i] != 0 && v.rs[i] != 1) return false;
    if (v.rs[i] == 1) {
      if (size != out_size || (reinterpret_cast<uintptr_t>(in[i].data) - out_addr) % 16 != 0) return false;
      for (int d = 0; d < v.nd; ++d)
        if (!((v.rmask >> d) & 1u) && (v.stride[i][d] - v.ostride[d]) % align != 0) return false;
    }
    ++i;
  }
  return true;
}

// Whether the streaming kernels can move kVec elements at a time: the innermost canonical dim is a multiple of
// kVec long and every input reads it contiguously (16-byte aligned, its other strides multiples of kVec) or
// broadcasts it (stride 0). The output is contiguous.
template <int kVec, int NIn>
inline bool inner_vectorizable(const View<NIn>& v, const KfTensorRef* in, const void* out) {
  const int inner = v.nd - 1;
  if (int64_t(v.div[inner].d) % kVec != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0) return false;
  for (int i = 0; i < NIn; ++i) {
    const int64_t s = v.stride[i][inner];
    if (s == 0) continue;
    if (s != 1 || reinterpret_cast<uintptr_t>(in[i].data) % 16 != 0) return false;
    for (int d = 0; d < v.nd; ++d)
      if (v.stride[i][d] % kVec != 0 && d != inner) return false;
  }
  return true;
}

inline int grid_for(int64_t blocks) { return int(blocks < (int64_t(1) << 30) ? (blocks > 0 ? blocks : 1) : (int64_t(1) << 30)); }

// Merges split partials into final statistics: a block per kept index when each has many splits.
template <class Stat>
inline cudaError_t launch_finalize(int64_t K, int64_t splits, int64_t R, const KfStats* partial, KfStats* stats,
                                   KfStats* stats_out, cudaStream_t stream) {
  if (splits >= 32)
    finalize_wide_kernel<Stat><<<grid_for(K), kStreamThreads, 0, stream>>>(K, splits, float(R), partial, stats,
                                                                         stats_out);
  else
    finalize_kernel<Stat><<<grid_for(ceil_div(K, kStreamThreads)), kStreamThreads, 0, stream>>>(
        K, splits, float(R), partial, stats, stats_out);
  return cudaGetLastError();
}

// The column family: statistics per kept column over a split of the reduced index (partials when splits > 1,
// else final statistics and, unless `stats_only`, the apply in the same kernel). Statistics without the apply
// read kColVec columns per lane when every input reads the inner kept dim contiguously or broadcasts it, with
// the splits that keep ~8 blocks per SM busy as far as `partial_capacity` (KfStats) holds them; else the scalar
// kernel with `splits`. `splits` is replaced by the count used, which the caller's finalize takes;
// `partials_only`: at least 2 (raw partials).
template <class Pro, class Stat, class Apply, typename TOut, typename... TIn>
inline cudaError_t launch_columns(const View<sizeof...(TIn)>& v, const KfTensorRef* in, const void* out,
                                  int64_t& splits, int64_t partial_capacity, const KfScalars& sc, KfStats* partial,
                                  KfStats* stats_out, KfStats* stats_only, cudaStream_t stream,
                                  bool partials_only = false) {
  constexpr int NIn = sizeof...(TIn);
  constexpr int kVec = int(16 / kf_min_size<TOut, TIn...>());
  constexpr int kColVec = kVec < kColVecMax ? kVec : kColVecMax;
  if constexpr (NIn * kColVec <= 32) {
    // A fused statistics + apply (one split, no stats_only) stays columns_kernel's: see columns_vec_kernel.
    const bool fused = splits == 1 && stats_only == nullptr && !partials_only;
    if (!fused && ((v.rmask >> (v.nd - 1)) & 1u) == 0 && inner_vectorizable<kColVec>(v, in, out)) {
      const int sms = kf_sm_count();
      const int64_t col_blocks = ceil_div(v.K / kColVec, kColLanes);
      int64_t vsplits = split_plan(Extent{true, v.K, v.R, false}, sms, int64_t(kColLanes) * kColVec).splits;
      const int64_t room = partial != nullptr ? partial_capacity / v.K : 0;
      if (partials_only && vsplits < 2) vsplits = 2;
      if (vsplits > room) vsplits = room >= 2 ? room : 1;
      // One split: the statistics alone (the fused apply is columns_kernel's), when the blocks fill the GPU.
      if (vsplits > 1 || (stats_only != nullptr && col_blocks >= int64_t(sms) * 4)) {
        const dim3 grid(unsigned(grid_for(col_blocks)), unsigned(vsplits));
        columns_vec_kernel<Pro, Stat, kColVec, TIn...>
            <<<grid, dim3(kColLanes, kColWarps), 0, stream>>>(v, int(vsplits), sc, partial, stats_out, stats_only);
        splits = vsplits;
        return cudaGetLastError();
      }
    }
  }
  const dim3 grid(unsigned(grid_for(ceil_div(v.K, kColLanes))), unsigned(splits));
  columns_kernel<Pro, Stat, Apply, TOut, TIn...>
      <<<grid, dim3(kColLanes, kColWarps), 0, stream>>>(v, int(splits), sc, partial, stats_out, stats_only);
  return cudaGetLastError();
}

}  // namespace kf_norm

template <class Stat>
size_t kf_normalize_workspace_bytes(const KfShape& shape, uint32_t reduce_mask) {
  const kf_norm::Extent e = kf_norm::extent(shape, reduce_mask);
  if (!e.ok || e.K * e.R == 0) return 0;
  const kf_norm::SplitPlan scalar = kf_norm::split_plan(e, kf_sm_count());
  if (e.reduced_inner || scalar.splits == 1) return scalar.bytes;  // rows, or columns fused with the apply
  // Split columns may be read in vectors, with more splits (kf_norm::launch_columns).
  const size_t vec = kf_norm::split_plan(e, kf_sm_count(), kf_norm::kColLanes * kf_norm::kColVecMax).bytes;
  return scalar.bytes > vec ? scalar.bytes : vec;
}

template <class Pro, class Stat, class Apply, typename TOut, typename... TIn>
cudaError_t kf_launch_normalize(const KfShape& shape, uint32_t reduce_mask, void* out, const KfTensorRef* in,
                                const KfScalars& sc, float* stats_out, void* workspace, size_t workspace_bytes,
                                cudaStream_t stream) {
  using namespace kf_norm;
  constexpr int NIn = sizeof...(TIn);
  static_assert(NIn >= 1, "kf_launch_normalize: at least one input");
  static_assert(Pro::kIn == NIn && Apply::kIn == NIn, "kf_launch_normalize: Pro::kIn == Apply::kIn == sizeof...(TIn)");
  constexpr int kBig = big_vpt(NIn);

  const Extent e = extent(shape, reduce_mask);
  if (!e.ok) return cudaErrorInvalidValue;
  if (e.K * e.R == 0) return cudaSuccess;  // before the pointer checks: an empty tensor's data pointer is null
  if (out == nullptr || in == nullptr) return cudaErrorInvalidValue;
  View<NIn> v;
  make_view(shape, reduce_mask, in, out, v);
  KfStats* stats_dst = reinterpret_cast<KfStats*>(stats_out);
  const int sms = kf_sm_count();

  // Held rows: the reduced dims are the innermost one or two canonical dims.
  const uint32_t inner_mask = (1u << v.nd) - (1u << (v.nd - v.nr));
  constexpr int kVec = int(16 / kf_min_size<TOut, TIn...>());
  constexpr int kSlots = 32 / kVec;  // 32 held values per thread
  // Misaligned rows (odd lengths, rows not starting on 16 bytes) take the same kernel with scalar edges: the
  // aligned instantiation stays free of the edge code.
  if (e.reduced_inner && v.nr == 1 && e.R >= 2 * kVec && e.R <= int64_t(kVecRowThreads) * kSlots * kVec) {
    // Threads per row: short rows (a layer norm over a 64-wide last dim) ~4 vectors per lane, a group of
    // lanes per row and many rows per warp; from 256 elements a warp, then 2..16 warps, 32 values per thread.
    int tpr = 1;
    if (e.R < 256) {
      while (int64_t(tpr) * 4 * kVec < e.R && tpr < 32) tpr *= 2;
    } else {
      tpr = 32;
      while (int64_t(tpr) * kSlots * kVec < e.R) tpr *= 2;
    }
    const bool aligned = rows_vectorizable<kVec>(v, in, out, sizeof(TOut), {sizeof(TIn)...});
    // The edge elements of a misaligned row are one per thread: a row needs a warp for them.
    if (aligned || (tpr >= 32 && rows_coaligned(v, in, out, sizeof(TOut), {sizeof(TIn)...}))) {
      const int threads = tpr <= 32 ? 128 : tpr;
      const int64_t rows_per_block = tpr <= 32 ? 128 / tpr : 1;
      const int blocks = grid_for(ceil_div(e.K, rows_per_block));
      if (aligned)
        rows_vec_kernel<Pro, Stat, Apply, kVec, kSlots, false, TOut, TIn...>
            <<<blocks, threads, 0, stream>>>(v, tpr, sc, stats_dst);
      else
        rows_vec_kernel<Pro, Stat, Apply, kVec, kSlots, true, TOut, TIn...>
            <<<blocks, threads, 0, stream>>>(v, tpr, sc, stats_dst);
      return cudaGetLastError();
    }
  }
  if constexpr (kf_long_rows<Pro>::value) {
    constexpr int kLongSlots = kLongRowValues / kVec, kLongEdgeSlots = kLongEdgeRowValues / kVec;
    if (e.reduced_inner && v.nr == 1 && e.R > int64_t(kVecRowThreads) * kSlots * kVec && e.K >= sms) {
      if (e.R <= int64_t(kVecRowThreads) * kLongSlots * kVec &&
          rows_vectorizable<kVec>(v, in, out, sizeof(TOut), {sizeof(TIn)...})) {
        rows_vec_kernel<Pro, Stat, Apply, kVec, kLongSlots, false, TOut, TIn...>
            <<<grid_for(e.K), kVecRowThreads, 0, stream>>>(v, kVecRowThreads, sc, stats_dst);
        return cudaGetLastError();
      }
      if (e.R <= int64_t(kVecRowThreads) * kLongEdgeSlots * kVec &&
          rows_coaligned(v, in, out, sizeof(TOut), {sizeof(TIn)...})) {
        rows_vec_kernel<Pro, Stat, Apply, kVec, kLongEdgeSlots, true, TOut, TIn...>
            <<<grid_for(e.K), kVecRowThreads, 0, stream>>>(v, kVecRowThreads, sc, stats_dst);
        return cudaGetLastError();
      }
    }
  }
  if (e.reduced_inner && v.nr <= 2 && v.rmask == inner_mask) {
    const int64_t L = e.R;
    if (L <= 32 * kRowsSmallVPT) {
      int log2 = 0;
      while ((int64_t(kRowsSmallVPT) << log2) < L) ++log2;  // lanes per row: smallest power of two that fits
      const int64_t rows_per_block = kGroupThreads >> log2;
      rows_resident_kernel<Pro, Stat, Apply, kRowsSmallVPT, false, TOut, TIn...>
          <<<grid_for(ceil_div(e.K, rows_per_block)), kGroupThreads, 0, stream>>>(v, log2, sc, stats_dst);
      return cudaGetLastError();
    }
    if (L <= 32 * kBig) {
      rows_resident_kernel<Pro, Stat, Apply, kBig, false, TOut, TIn...>
          <<<grid_for(ceil_div(e.K, kGroupThreads / 32)), kGroupThreads, 0, stream>>>(v, 5, sc, stats_dst);
      return cudaGetLastError();
    }
    // A block per row pays off when the rows fill the GPU (or are short enough that splitting buys nothing).
    if (L <= int64_t(kMaxBlockRowThreads) * kBig && (e.K >= sms || L <= 4096)) {
      const int threads = int(clamp64(ceil_div(ceil_div(L, kBig), 32) * 32, 64, kMaxBlockRowThreads));
      rows_resident_kernel<Pro, Stat, Apply, kBig, true, TOut, TIn...>
          <<<grid_for(e.K), threads, 0, stream>>>(v, 0, sc, stats_dst);
      return cudaGetLastError();
    }
  }

  const SplitPlan plan = split_plan(e, sms);
  if (workspace_bytes < plan.bytes || (plan.bytes > 0 && workspace == nullptr)) return cudaErrorInvalidValue;
  int64_t splits = plan.splits;
  KfStats* stats = reinterpret_cast<KfStats*>(workspace);
  KfStats* partial = stats + e.K;
  const int64_t apply_blocks = ceil_div(e.K * e.R, int64_t(kStreamThreads) * kUnroll);

  // Vectors of the streaming kernels: as wide as 16 bytes of the narrowest type, while a thread's two vectors
  // of every input fit its registers.
  constexpr int kStreamVec = NIn * kVec <= 32 ? kVec : 1;
  const bool vectorized = kStreamVec > 1 && inner_vectorizable<kStreamVec>(v, in, out);
  // Rows of the innermost (reduced) dim long enough to keep a block's threads busy take the row-wise kernels.
  const bool plane = vectorized && e.reduced_inner && int64_t(v.rin.d) >= int64_t(kStreamThreads) * kStreamVec;
  if (e.reduced_inner) {
    if (plane) {
      if constexpr (kStreamVec > 1)  // plane implies vectorized: the row-wise kernels have no scalar build
        row_partial_plane_kernel<Pro, Stat, kStreamVec, TIn...>
            <<<grid_for(e.K * plan.splits), kStreamThreads, 0, stream>>>(v, KfFastDiv::make(uint64_t(plan.splits)),
                                                                         sc, partial, stats, stats_dst);
    } else if (vectorized)
      row_partial_vec_kernel<Pro, Stat, kStreamVec, TIn...>
          <<<grid_for(e.K * plan.splits), kStreamThreads, 0, stream>>>(v, KfFastDiv::make(uint64_t(plan.splits)), sc,
                                                                       partial, stats, stats_dst);
    else
      row_partial_kernel<Pro, Stat, TIn...>
          <<<grid_for(e.K * plan.splits), kStreamThreads, 0, stream>>>(v, KfFastDiv::make(uint64_t(plan.splits)), sc,
                                                                       partial, stats, stats_dst);
    KF_RETURN_IF_ERROR(cudaGetLastError());
  } else {
    const int64_t capacity = workspace != nullptr ? int64_t(workspace_bytes / sizeof(KfStats)) - e.K : 0;
    KF_RETURN_IF_ERROR((launch_columns<Pro, Stat, Apply, TOut, TIn...>(v, in, out, splits, capacity, sc, partial,
                                                                      stats_dst, nullptr, stream)));
    if (splits == 1) return cudaSuccess;  // stats and apply done in one kernel
  }
  if (splits > 1) KF_RETURN_IF_ERROR(launch_finalize<Stat>(e.K, splits, e.R, partial, stats, stats_dst, stream));
  if (plane) {
    if constexpr (kStreamVec > 1) {
      const int64_t chunks = ceil_div(int64_t(v.rin.d) / kStreamVec, int64_t(kStreamThreads) * kPlaneVecsPerThread);
      apply_plane_kernel<Pro, Apply, kStreamVec, TOut, TIn...>
          <<<grid_for(e.K * e.R / int64_t(v.rin.d) * chunks), kStreamThreads, 0, stream>>>(
              v, stats, sc, KfFastDiv::make(uint64_t(chunks)));
    }
  } else if (vectorized)
    apply_vec_kernel<Pro, Apply, kStreamVec, TOut, TIn...>
        <<<grid_for(ceil_div(apply_blocks, kStreamVec)), kStreamThreads, 0, stream>>>(v, stats, sc);
  else
    apply_kernel<Pro, Apply, TOut, TIn...>
        <<<grid_for(apply_blocks * kUnroll / kf_apply_unroll<sizeof...(TIn)>()), kStreamThreads, 0, stream>>>(
            v, stats, sc);
  return cudaGetLastError();
}
