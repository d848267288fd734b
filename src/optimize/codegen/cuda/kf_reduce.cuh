// kf_reduce.cuh — a reduction of a generated pointwise prologue over any set of dims, with a generated
// epilogue: out[kept] = Epi(Acc over the reduced dims of Pro(in[...] at each element)).
//
// ---------------------------------------------------------------------------------------------- contract
// Functors (generated; all math fp32):
//   struct Pro { static constexpr int kIn = N;     // 1 <= N <= 8
//                __device__ Acc::Value operator()(const float (&x)[kIn], const KfScalars& sc) const; };
//   struct Epi { __device__ float operator()(const KfAccResult& r, const KfScalars& sc) const; };
// Accumulators (provided here), what they leave in KfAccResult {value, m2, index, count, part}:
//   KfAccSum, KfAccProd        value = sum / product (empty: 0 / 1)
//   KfAccSums<K>               part[k] = sum of component k of a KfSums<K> (K <= 4) the prologue returns:
//                              several sums over one pass (cosine similarity's dot product and two norms)
//   KfAccMax, KfAccMin         value = max / min, NaN if any element is NaN (empty: -inf / +inf)
//   KfAccArgMax, KfAccArgMin   value = max / min, index = flat index of its first occurrence (a NaN counts as
//                              the extreme: the first NaN wins), row-major over the reduced dims in shape
//                              order (for one reduced dim: torch's argmax index)
//   KfAccLogSumExp             value = log(sum exp(x)) from an online max and a rescaled sum (all -inf: -inf;
//                              +inf present: +inf; NaN present: NaN)
//   KfAccWelford               value = mean, m2 = sum (x - mean)^2 (Welford per thread, Chan's merge)
//   KfAccCrossEntropy          (indexed; Value KfSums<2> = {logit, target}) value = log sum exp(x - m), m2 = m,
//                              part = {logit at the target class, 0, matches, target}; ...Smoothed: part[1] =
//                              the sum of the logits
//   count = number of reduced elements, always (as float).
//
//   size_t kf_reduce_workspace_bytes<Acc>(shape, reduce_mask)
//   cudaError_t kf_launch_reduce<Pro, Acc, Epi, TOut, TIn...>(shape, reduce_mask, out, in, sc, workspace,
//                                                             workspace_bytes, stream)
//   shape        iteration shape, 0 <= ndim <= KF_MAX_DIMS.
//   reduce_mask  bit d set: dim d is reduced (bits >= ndim must be clear). No bit: Epi of each element.
//   out          TOut elements, contiguous over the kept dims in their shape order (keepdim is a reshape).
//                TOut = int64_t only with KfAccArgMax/ArgMin, and then out = r.index (Epi unused);
//                otherwise float / __half / __nv_bfloat16 and out = Epi(r, sc).
//   in[k]        k < Pro::kIn: element strides per dim of `shape` (0 = broadcast, any non-negative layout),
//                element type TIn[k] (float, __half, __nv_bfloat16).
//   workspace    device memory for the partials of a reduction split across blocks, 16-byte aligned, contents
//                ignored; kf_reduce_workspace_bytes says how much the launcher may use (0: never splits). It
//                depends on the shape and mask only, not on the device. Less (or null) is still correct: the
//                split is narrowed to what fits, down to no split.
//   Returns cudaGetLastError() after the last launch; cudaSuccess without a launch when the output is empty;
//   cudaErrorInvalidValue for a bad ndim, size or mask. An empty reduction (a reduced dim of size 0) writes
//   Epi of the empty accumulator (sum 0, prod 1, count 0).
//   Deterministic: fixed assignment of elements to threads, fixed merge trees, no atomics.
//
// ---------------------------------------------------------------------------------------------- geometry
// The host canonicalises the iteration space: size-1 dims dropped; dims ordered by the memory layout of the
// operand with the most non-broadcast dims (so a transposed input is still read along its contiguous dim);
// neighbours of the same kind (kept/kept or reduced/reduced) merged where every operand's strides — and the
// output / flat-index multipliers — chain. Then, by the kind of the innermost dim:
//  - rows (innermost dim reduced): a group of 1..256 threads per output row, sized so each thread gets ~4
//    vectors (many short rows share a warp, long rows get a block); coordinates along the reduction come from
//    peeling the vector index, so BatchNorm's [N, C, HW] reducing N and HW is a row reduction of C rows.
//    When the rows are too few to fill the GPU, each row's range is split over gridDim.y blocks.
//  - columns (innermost dim kept: sum over dim 1 of NCHW): bx threads along the contiguous kept dim (warps
//    read whole 512-byte segments; a short kept inner dim's tile runs on into the next outer indices) x by
//    threads along the reduction, combined by a shared-memory tree; split over gridDim.y blocks when the
//    columns are too few.
// 16-byte vector loads along the innermost dim when its length and every operand's alignment allow (32-bit
// index launches only: past 2^31 elements or offsets the kernels take scalar loads). Rows of another length
// (67, 4095) or starting between boundaries (a sliced input) are still read in vectors when their moving
// operands are co-aligned: each row from its first 16-byte boundary, the few elements before it and after its
// last whole vector one by one (kf_red_shiftable). A split
// reduction writes Acc states to the workspace ([split][output]) and a finalize kernel merges them in a fixed
// order, a warp (or less) per output.
#pragma once
#include <math.h>
#include "kf_common.cuh"

#define KF_RED_THREADS 256
#define KF_RED_MAX_IN 8
#define KF_RED_MAX_SPLITS 1024
#define KF_RED_MAX_PARTIALS (1 << 19)  // workspace entries (splits x outputs) at most
#define KF_ACC_MAX_PARTS 4

struct KfAccResult {
  float value;
  float m2;
  int64_t index;
  float count;
  float part[KF_ACC_MAX_PARTS];
};

// What the prologue of a KfAccSums<K> reduction returns at one element: one value per sum.
template <int K>
struct KfSums {
  float v[K];
};

// ---------------------------------------------------------------------------------------------- accumulators
// Each policy: Value (what the prologue returns per element), State (trivially copyable), init(),
// push(state, x, flat_index) for one element, merge(a, b) for two partial states, shfl_xor (a warp butterfly
// step), result(). kIndexed: push needs the flat index. Optionally push_vec<K>(state, x[K]) for K consecutive
// elements of one output, when taking them together is cheaper than one by one.

struct KfAccSum {
  using Value = float;
  struct State { float v; };
  static constexpr bool kIndexed = false;
  static __device__ __forceinline__ State init() { return {0.f}; }
  static __device__ __forceinline__ void push(State& a, float x, int64_t) { a.v += x; }
  static __device__ __forceinline__ void merge(State& a, const State& b) { a.v += b.v; }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) { return {__shfl_xor_sync(0xffffffffu, a.v, m)}; }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) { return {a.v, 0.f, 0, n}; }
};

struct KfAccProd {
  using Value = float;
  struct State { float v; };
  static constexpr bool kIndexed = false;
  static __device__ __forceinline__ State init() { return {1.f}; }
  static __device__ __forceinline__ void push(State& a, float x, int64_t) { a.v *= x; }
  static __device__ __forceinline__ void merge(State& a, const State& b) { a.v *= b.v; }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) { return {__shfl_xor_sync(0xffffffffu, a.v, m)}; }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) { return {a.v, 0.f, 0, n}; }
};

template <int K>
struct KfAccSums {
  static_assert(K >= 1 && K <= KF_ACC_MAX_PARTS, "KfAccSums: 1..KF_ACC_MAX_PARTS sums");
  using Value = KfSums<K>;
  using State = KfSums<K>;
  static constexpr bool kIndexed = false;
  static __device__ __forceinline__ State init() { return State{}; }
  static __device__ __forceinline__ void push(State& a, const Value& x, int64_t) {
#pragma unroll
    for (int k = 0; k < K; ++k) a.v[k] += x.v[k];
  }
  static __device__ __forceinline__ void merge(State& a, const State& b) {
#pragma unroll
    for (int k = 0; k < K; ++k) a.v[k] += b.v[k];
  }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) {
    State r;
#pragma unroll
    for (int k = 0; k < K; ++k) r.v[k] = __shfl_xor_sync(0xffffffffu, a.v[k], m);
    return r;
  }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) {
    KfAccResult r{a.v[0], 0.f, 0, n};
#pragma unroll
    for (int k = 0; k < K; ++k) r.part[k] = a.v[k];
    return r;
  }
};

// max / min that propagate NaN as torch does: once a NaN is taken it stays (nothing compares above it).
template <bool kMax>
struct KfAccExtreme {
  using Value = float;
  struct State { float v; };
  static constexpr bool kIndexed = false;
  static __device__ __forceinline__ bool takes(float a, float b) { return (kMax ? b > a : b < a) || b != b; }
  static __device__ __forceinline__ State init() { return {kMax ? -INFINITY : INFINITY}; }
  static __device__ __forceinline__ void push(State& a, float x, int64_t) { a.v = takes(a.v, x) ? x : a.v; }
  static __device__ __forceinline__ void merge(State& a, const State& b) { a.v = takes(a.v, b.v) ? b.v : a.v; }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) { return {__shfl_xor_sync(0xffffffffu, a.v, m)}; }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) { return {a.v, 0.f, 0, n}; }
};
struct KfAccMax : KfAccExtreme<true> {};
struct KfAccMin : KfAccExtreme<false> {};

// argmax / argmin: the extreme with the smallest flat index, a NaN beating any number. The rule compares
// indices, so it gives torch's "first occurrence" whatever order elements and partials are combined in.
template <bool kMax>
struct KfAccArgExtreme {
  using Value = float;
  struct State { float v; int64_t i; };
  static constexpr bool kIndexed = true;
  static __device__ __forceinline__ bool takes(float av, int64_t ai, float bv, int64_t bi) {
    const bool a_nan = av != av, b_nan = bv != bv;
    if (a_nan || b_nan) return b_nan && (!a_nan || bi < ai);
    return (kMax ? bv > av : bv < av) || (bv == av && bi < ai);
  }
  static __device__ __forceinline__ State init() { return {kMax ? -INFINITY : INFINITY, INT64_MAX}; }
  static __device__ __forceinline__ void push(State& a, float x, int64_t i) {
    if (takes(a.v, a.i, x, i)) a = {x, i};
  }
  static __device__ __forceinline__ void merge(State& a, const State& b) {
    if (takes(a.v, a.i, b.v, b.i)) a = b;
  }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) {
    return {__shfl_xor_sync(0xffffffffu, a.v, m), static_cast<int64_t>(__shfl_xor_sync(0xffffffffu, static_cast<long long>(a.i), m))};
  }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) { return {a.v, 0.f, a.i, n}; }
};
struct KfAccArgMax : KfAccArgExtreme<true> {};
struct KfAccArgMin : KfAccArgExtreme<false> {};

// log(sum exp(x)) kept as (m, s) = (running max, sum of exp(x - m)): one exp per element, rescaling only when
// the max moves. Non-finite maxima are settled without exp: -inf (nothing but -inf yet) leaves s alone, +inf
// makes the result +inf, NaN makes it NaN.
struct KfAccLogSumExp {
  using Value = float;
  struct State { float m; float s; };
  static constexpr bool kIndexed = false;
  // A merge costs an accurate exp and branches (a sum's is one add): a row's threads each take more vectors,
  // so the merges of a row of 4096 (8 levels over 256 threads, 7 of them serial) weigh less than its elements.
  static constexpr int kRowVecsPerThread = 16;
  static constexpr int kColStepsPerThread = 16;  // the column path's threads along the reduction likewise
  static __device__ __forceinline__ State init() { return {-INFINITY, 0.f}; }
  static __device__ __forceinline__ void combine(State& a, float mb, float sb) {
    if (a.m != a.m || mb != mb) { a.m = NAN; a.s = 1.f; return; }
    const float m = fmaxf(a.m, mb);
    if (m == -INFINITY) { a.s += sb; return; }
    if (m == INFINITY) { a.m = m; a.s = 1.f; return; }
    if (mb > a.m) {
      a.s = a.s * expf(a.m - mb) + sb;
      a.m = mb;
    } else {
      a.s += sb * expf(mb - a.m);
    }
  }
  static __device__ __forceinline__ void push(State& a, float x, int64_t) { combine(a, x, 1.f); }
  // K consecutive elements at once, the hot path of a long row: the running max moves only when the K
  // elements' max exceeds it (then the sum is rescaled once), and each element costs one fast exp of x - m
  // (relative error ~1e-7, below the sum's own rounding). The per-element branches and accurate exp of
  // combine made this kernel compute-bound (ncu: SM 75%, DRAM 41%). A NaN element makes the sum NaN, as torch's
  // result is; an infinite maximum, a state already at +inf or NaN, or a vector of -inf / NaN only (fmaxf
  // ignores NaN) go element by element through combine, which settles those exactly.
  template <int K>
  static __device__ __forceinline__ void push_vec(State& a, const float (&x)[K]) {
    float m = x[0];
#pragma unroll
    for (int j = 1; j < K; ++j) m = fmaxf(m, x[j]);
    if (!(fabsf(m) < INFINITY) || !(a.m < INFINITY)) {
#pragma unroll
      for (int j = 0; j < K; ++j) combine(a, x[j], 1.f);
      return;
    }
    if (m > a.m) {
      a.s *= __expf(a.m - m);  // a.m = -inf (nothing yet): exp gives 0, the empty sum stays 0
      a.m = m;
    }
#pragma unroll
    for (int j = 0; j < K; ++j) a.s += __expf(x[j] - a.m);
    if (a.s != a.s) a.m = NAN;  // a NaN element: kept in the max too, so a later +inf cannot reset it away
  }
  static __device__ __forceinline__ void merge(State& a, const State& b) { combine(a, b.m, b.s); }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) {
    return {__shfl_xor_sync(0xffffffffu, a.m, m), __shfl_xor_sync(0xffffffffu, a.s, m)};
  }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) {
    return {a.m == -INFINITY ? -INFINITY : a.m + logf(a.s), 0.f, 0, n};
  }
};

// Cross entropy of one row of logits against its class index, in one pass over the row: the prologue gives
// (logit, target as float) at each element, the flat index along the class dim says which class it is. The
// state keeps the row's log-sum-exp as KfAccLogSumExp does, the logit at the target class (and how many
// elements matched it: exactly one for a valid target), the row's target and, with kSum (label smoothing's mean
// term), the sum of the logits. result(): value = log(sum exp(x - m)), m2 = m, part = {picked, sum, hits,
// target}, so the epilogue forms (m - picked) + log s without the cancellation of (m + log s) - picked.
// Class indices are compared as floats: exact below 2^24 classes (the planner's bound); a target at or above
// 2^24 rounds to a float at or above 2^24, which matches no class, so an out-of-range target makes hits 0.
template <bool kSum>
struct KfAccCrossEntropyT {
  using Value = KfSums<2>;
  struct State { KfAccLogSumExp::State lse; float picked; float sum; float hits; float target; };
  static constexpr bool kIndexed = true;
  static constexpr int kRowVecsPerThread = KfAccLogSumExp::kRowVecsPerThread;
  static constexpr int kColStepsPerThread = KfAccLogSumExp::kColStepsPerThread;
  static __device__ __forceinline__ State init() { return {KfAccLogSumExp::init(), 0.f, 0.f, 0.f, NAN}; }
  static __device__ __forceinline__ void push(State& a, const Value& x, int64_t i) {
    KfAccLogSumExp::push(a.lse, x.v[0], i);
    if (kSum) a.sum += x.v[0];
    if (float(i) == x.v[1]) {
      a.picked += x.v[0];
      a.hits += 1.f;
    }
    a.target = x.v[1];
  }
  // K consecutive classes of one row (flat, flat + step, ...), one target: the log-sum-exp of the K logits at
  // once; the target is looked for among them only when it falls in their range, once per vector (a compare per
  // element made the row kernel compute-bound: ncu, SM 71% against DRAM 41%).
  template <int K>
  static __device__ __forceinline__ void push_vec_at(State& a, const Value (&x)[K], int64_t flat, int64_t step) {
    float logits[K];
#pragma unroll
    for (int j = 0; j < K; ++j) logits[j] = x[j].v[0];
    KfAccLogSumExp::push_vec<K>(a.lse, logits);
    if (kSum) {
#pragma unroll
      for (int j = 0; j < K; ++j) a.sum += logits[j];
    }
    const float target = x[0].v[1];
    const float offset = target - float(flat);  // exact: both below 2^24 in magnitude (the planner's bound)
    const float fstep = float(step);
    if (offset >= 0.f && offset < float(K) * fstep) {
#pragma unroll
      for (int j = 0; j < K; ++j) {
        if (offset == float(j) * fstep) {
          a.picked += logits[j];
          a.hits += 1.f;
        }
      }
    }
    a.target = target;
  }
  static __device__ __forceinline__ void merge(State& a, const State& b) {
    KfAccLogSumExp::merge(a.lse, b.lse);
    a.picked += b.picked;
    if (kSum) a.sum += b.sum;
    a.hits += b.hits;
    if (a.target != a.target) a.target = b.target;
  }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) {
    return {KfAccLogSumExp::shfl_xor(a.lse, m), __shfl_xor_sync(0xffffffffu, a.picked, m),
            kSum ? __shfl_xor_sync(0xffffffffu, a.sum, m) : 0.f, __shfl_xor_sync(0xffffffffu, a.hits, m),
            __shfl_xor_sync(0xffffffffu, a.target, m)};
  }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) {
    KfAccResult r{a.lse.m == -INFINITY ? -INFINITY : logf(a.lse.s), a.lse.m, 0, n};
    r.part[0] = a.picked;
    r.part[1] = a.sum;
    r.part[2] = a.hits;
    r.part[3] = a.target;
    return r;
  }
};
using KfAccCrossEntropy = KfAccCrossEntropyT<false>;
using KfAccCrossEntropySmoothed = KfAccCrossEntropyT<true>;

// Mean and M2 = sum (x - mean)^2: Welford's update per element (no cancellation of a sum of squares), Chan's
// formula to merge partials of counts na, nb: delta = mean_b - mean_a, M2 = M2a + M2b + delta^2 na nb / n.
struct KfAccWelford {
  using Value = float;
  struct State { float mean; float m2; float n; };
  static constexpr bool kIndexed = false;
  static __device__ __forceinline__ State init() { return {0.f, 0.f, 0.f}; }
  static __device__ __forceinline__ void push(State& a, float x, int64_t) {
    a.n += 1.f;
    const float d = x - a.mean;
    a.mean += d / a.n;
    a.m2 += d * (x - a.mean);
  }
  // K consecutive elements: their exact mean and M2, then one Chan merge (one divide per K elements).
  template <int K>
  static __device__ __forceinline__ void push_vec(State& a, const float (&x)[K]) {
    float mean, m2;
    kf_mean_m2(x, mean, m2);
    merge(a, State{mean, m2, float(K)});
  }
  static __device__ __forceinline__ void merge(State& a, const State& b) {
    if (b.n == 0.f) return;
    if (a.n == 0.f) { a = b; return; }
    const float n = a.n + b.n;
    const float d = b.mean - a.mean;
    const float wb = b.n / n;
    a.mean += d * wb;
    a.m2 += b.m2 + d * d * a.n * wb;
    a.n = n;
  }
  static __device__ __forceinline__ State shfl_xor(const State& a, int m) {
    return {__shfl_xor_sync(0xffffffffu, a.mean, m), __shfl_xor_sync(0xffffffffu, a.m2, m),
            __shfl_xor_sync(0xffffffffu, a.n, m)};
  }
  static __device__ __forceinline__ KfAccResult result(const State& a, float n) { return {a.mean, a.m2, 0, n}; }
};

// ---------------------------------------------------------------------------------------------- parameters

// The canonical iteration space narrowed to IdxT. Kept dims (K) and reduced dims (R), innermost first; the
// vectorised dim (R[0] on the row path, K[0] on the column path) is counted in vectors.
template <int N, typename IdxT>
struct KfRedParams {
  const void* in[N];
  void* out;
  void* ws;
  int nk, nr;
  IdxT ksize[KF_MAX_DIMS];
  KfIdxDiv<IdxT> kdiv[KF_MAX_DIMS];
  IdxT kstride[N][KF_MAX_DIMS];
  IdxT kout[KF_MAX_DIMS];       // output element step per kept dim
  IdxT rsize[KF_MAX_DIMS];
  KfIdxDiv<IdxT> rdiv[KF_MAX_DIMS];
  IdxT rstride[N][KF_MAX_DIMS];
  int64_t rflat[KF_MAX_DIMS];   // flat reduced-index step per reduced dim (argmax/argmin)
  uint32_t bcast_mask;          // bit k: operand k is broadcast along the vectorised dim
  int64_t num_out;              // output elements
  IdxT rows;                    // row path: output rows; column path: column tiles
  IdxT extent;                  // reduction length per output: vectors (row path) or steps (column path)
  IdxT chunk;                   // extent per split (gridDim.y splits)
  int group_log2;               // row path: log2 threads per row; column path: log2 bx
  IdxT cols;                    // column path: vector columns of the kept inner dim per outer index
  KfIdxDiv<IdxT> cols_div;
  IdxT kept_vecs;               // column path: vector columns over all outer indices
  int64_t inner_flat;           // row path: flat-index step of one element along the vectorised dim
  // Row path over rows that are not whole aligned vectors (kf_red_shiftable): per row, vectors start at the
  // first element of operand `lead` that is 16-byte aligned; the row's other operands are co-aligned with it.
  bool shift_rows;
  int lead;                     // an operand that moves along the row
  int lead_phase;               // its base pointer's misalignment, in elements
  IdxT row_len;                 // elements per row
  int64_t out_inner;            // column path: output step of one element along the vectorised dim
  float count;                  // reduced elements per output
};

// ---------------------------------------------------------------------------------------------- device

// Adds the coordinates of linear index `idx` over n dims (innermost first; the outermost takes what is left,
// undivided) to each operand's offset and, when kExtra, to `extra` with its own per-dim multipliers.
template <bool kExtra, int N, typename IdxT, typename ExtraT>
__device__ __forceinline__ void kf_red_peel(IdxT idx, int n, const IdxT (&size)[KF_MAX_DIMS],
                                            const KfIdxDiv<IdxT> (&div)[KF_MAX_DIMS],
                                            const IdxT (&stride)[N][KF_MAX_DIMS], const ExtraT (&mult)[KF_MAX_DIMS],
                                            IdxT (&off)[N], ExtraT& extra) {
#pragma unroll
  for (int d = 0; d < KF_MAX_DIMS; ++d) {
    if (d == n) break;
    IdxT c = idx;
    if (d + 1 < n) {
      const IdxT q = div[d].div(idx);
      c = idx - q * size[d];
      idx = q;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += c * stride[k][d];
    if (kExtra) extra += ExtraT(c) * mult[d];
  }
}

template <int kVec, typename... TIn, typename IdxT, int N, size_t... K>
__device__ __forceinline__ void kf_red_load(const KfRedParams<N, IdxT>& p, const IdxT (&off)[N], float (&v)[N][kVec],
                                            std::index_sequence<K...>) {
  (kf_load_vec<TIn, kVec>(p.in[K], off[K], (p.bcast_mask >> K) & 1u, v[K]), ...);
}

// One vector of every input as loaded, converted to fp32 only when pushed: the vectors a thread keeps in flight
// then cost registers by their bytes (kf_load_raw), not by their element count.
template <int kVec, typename... TIn>
struct KfRedRaw {
  static constexpr int kWords = int((kVec * kf_max_size<TIn...>() + 15) / 16);
  uint4 w[sizeof...(TIn)][kWords];
  template <int K, typename T>
  __device__ __forceinline__ KfRawVec<T, kVec>& in() { return *reinterpret_cast<KfRawVec<T, kVec>*>(w[K]); }
  template <int K, typename T>
  __device__ __forceinline__ const KfRawVec<T, kVec>& in() const { return *reinterpret_cast<const KfRawVec<T, kVec>*>(w[K]); }
};

template <int kVec, typename... TIn, typename IdxT, int N, size_t... K>
__device__ __forceinline__ void kf_red_load_raw(const KfRedParams<N, IdxT>& p, const IdxT (&off)[N],
                                                KfRedRaw<kVec, TIn...>& r, std::index_sequence<K...>) {
  (kf_load_raw<TIn, kVec>(p.in[K], off[K], (p.bcast_mask >> K) & 1u, r.template in<int(K), TIn>()), ...);
}

template <int kVec, typename... TIn, size_t... K>
__device__ __forceinline__ void kf_red_to_float(const KfRedRaw<kVec, TIn...>& r, float (&v)[sizeof...(TIn)][kVec],
                                                std::index_sequence<K...>) {
  (kf_raw_to_float<TIn, kVec>(r.template in<int(K), TIn>(), v[K]), ...);
}

template <class Pro, int kVec, int N>
__device__ __forceinline__ auto kf_red_prologue(const Pro& pro, const float (&v)[N][kVec], int j, const KfScalars& sc) {
  float x[N];
#pragma unroll
  for (int k = 0; k < N; ++k) x[k] = v[k][j];
  return pro(x, sc);
}

// The kVec consecutive elements of one output at one vector: together when the accumulator can take them so.
template <class Acc, class Pro, int kVec, int N>
__device__ __forceinline__ void kf_red_push_vector(typename Acc::State& st, const Pro& pro, const float (&v)[N][kVec],
                                                   int64_t flat, int64_t inner_flat, const KfScalars& sc) {
  if constexpr (KfHasPushVec<Acc>::value && kVec > 1) {
    float y[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) y[j] = kf_red_prologue<Pro>(pro, v, j, sc);
    Acc::template push_vec<kVec>(st, y);
  } else if constexpr (KfHasPushVecAt<Acc>::value && kVec > 1) {
    typename Acc::Value y[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) y[j] = kf_red_prologue<Pro>(pro, v, j, sc);
    Acc::template push_vec_at<kVec>(st, y, flat, inner_flat);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) Acc::push(st, kf_red_prologue<Pro>(pro, v, j, sc), flat + j * inner_flat);
  }
}

// The final value of one output: Epi of the result, or the index for an int64 (argmax/argmin) output.
template <class Acc, class Epi, typename TOut>
__device__ __forceinline__ void kf_red_store(void* out, int64_t off, const typename Acc::State& st, float count,
                                             const KfScalars& sc) {
  const KfAccResult r = Acc::result(st, count);
  if constexpr (std::is_same<TOut, int64_t>::value) {
    static_cast<int64_t*>(out)[off] = r.index;
  } else {
    kf_store<TOut>(out, off, Epi{}(r, sc));
  }
}

// A finished partial or final state: the workspace slot [split][output] when the reduction is split.
template <class Acc, class Epi, typename TOut, typename P>
__device__ __forceinline__ void kf_red_emit(const P& p, const typename Acc::State& st, int64_t out_off,
                                            const KfScalars& sc) {
  if (gridDim.y > 1) {
    static_cast<typename Acc::State*>(p.ws)[int64_t(blockIdx.y) * p.num_out + out_off] = st;
  } else {
    kf_red_store<Acc, Epi, TOut>(p.out, out_off, st, p.count, sc);
  }
}

// Vectors (row path) or steps (column path) whose loads a thread has in flight together: 64 bytes per
// thread for one fp32 input; fewer with more inputs, and with 64-bit indices (their offsets cost registers).
template <int N, typename IdxT>
__host__ __device__ constexpr int kf_red_unroll() {
  return (N == 1 ? 4 : (N == 2 ? 2 : 1)) / (sizeof(IdxT) == 8 && N <= 2 ? 2 : 1);
}

template <typename P>
__device__ __forceinline__ auto kf_red_min(P a, P b) { return a < b ? a : b; }

// Blocks per SM the kernels are compiled for (0: no bound, ptxas's own choice). Without a target ptxas gave a
// 64-bit row kernel with a tanh prologue 48 registers and 12 bytes of spills, and a 32-bit row kernel (two fp32
// inputs, a bool xor's mean, kVec 4) 32 registers and 8 bytes; a 4-block bound (64 registers) holds both and the
// other row and 64-bit variants without local memory (39 registers for the latter). The 32-bit column kernels
// keep ptxas's choice: under the same bound the fp16 Welford one (kVec 8) spills 40 bytes.
template <typename IdxT, bool kRows>
__host__ __device__ constexpr int kf_red_min_blocks() { return sizeof(IdxT) == 8 || kRows ? 4 : 0; }

// Row path: groups of 2^group_log2 threads, one output row each; split s = blockIdx.y covers vectors
// [s * chunk, (s + 1) * chunk) of every row.
template <class Pro, class Acc, class Epi, int kVec, typename IdxT, typename TOut, typename... TIn>
__global__ void __launch_bounds__(KF_RED_THREADS, kf_red_min_blocks<IdxT, true>())
    kf_reduce_rows_kernel(const KfRedParams<sizeof...(TIn), IdxT> p, const KfScalars sc) {
  constexpr int N = sizeof...(TIn);
  constexpr int kUnroll = kf_red_unroll<N, IdxT>();
  using State = typename Acc::State;
  __shared__ State warp_state[KF_RED_THREADS / 32];
  const Pro pro{};
  const int tpr = 1 << p.group_log2;
  const int lane = threadIdx.x & (tpr - 1);
  const int rows_per_block = KF_RED_THREADS >> p.group_log2;
  const IdxT v_begin = IdxT(blockIdx.y) * p.chunk;
  const IdxT v_end = kf_red_min<IdxT>(p.extent, v_begin + p.chunk);

  for (IdxT row0 = IdxT(blockIdx.x) * rows_per_block; row0 < p.rows; row0 += IdxT(gridDim.x) * rows_per_block) {
    const IdxT row = row0 + IdxT(threadIdx.x >> p.group_log2);
    State st = Acc::init();
    IdxT out_off = 0;
    if (row < p.rows) {
      IdxT base[N];
#pragma unroll
      for (int k = 0; k < N; ++k) base[k] = 0;
      kf_red_peel<true>(row, p.nk, p.ksize, p.kdiv, p.kstride, p.kout, base, out_off);
      IdxT row_end = v_end;
      int64_t head_flat = 0;
      if (p.shift_rows) {
        // This row's vectors start at its first 16-byte boundary; the elements before it (head) and after the
        // last whole vector (tail) are pushed one by one, by the first split only.
        const IdxT head = (kVec - (IdxT(p.lead_phase) + base[p.lead]) % kVec) % kVec;
        const IdxT row_vecs = (p.row_len - head) / kVec;
        if (blockIdx.y == 0) {
          const IdxT edges = p.row_len - row_vecs * kVec;
          for (IdxT e = lane; e < edges; e += tpr) {
            const IdxT el = e < head ? e : e + row_vecs * kVec;
            IdxT off[N];
#pragma unroll
            for (int k = 0; k < N; ++k) off[k] = base[k] + (((p.bcast_mask >> k) & 1u) ? IdxT(0) : el);
            float x1[N][1];
            kf_red_load<1, TIn...>(p, off, x1, std::index_sequence_for<TIn...>{});
            Acc::push(st, kf_red_prologue<Pro>(pro, x1, 0, sc), int64_t(el) * p.inner_flat);
          }
        }
#pragma unroll
        for (int k = 0; k < N; ++k) base[k] += ((p.bcast_mask >> k) & 1u) ? IdxT(0) : head;
        head_flat = int64_t(head) * p.inner_flat;
        row_end = kf_red_min<IdxT>(v_end, row_vecs);
      }
      for (IdxT v = v_begin + lane; v < row_end; v += IdxT(tpr) * kUnroll) {
        KfRedRaw<kVec, TIn...> x[kUnroll];
        int64_t flat[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const IdxT vu = v + IdxT(u * tpr);
          flat[u] = head_flat;
          if (vu < row_end) {
            IdxT off[N];
#pragma unroll
            for (int k = 0; k < N; ++k) off[k] = base[k];
            kf_red_peel<Acc::kIndexed>(vu, p.nr, p.rsize, p.rdiv, p.rstride, p.rflat, off, flat[u]);
            kf_red_load_raw<kVec, TIn...>(p, off, x[u], std::index_sequence_for<TIn...>{});
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (v + IdxT(u * tpr) < row_end) {
            float xf[N][kVec];
            kf_red_to_float<kVec, TIn...>(x[u], xf, std::index_sequence_for<TIn...>{});
            kf_red_push_vector<Acc>(st, pro, xf, flat[u], p.inner_flat, sc);
          }
        }
      }
    }
    // The row's threads combine: lanes by butterfly shuffles (inactive rows carry the identity), then the
    // row's warps through shared memory in warp order.
    const int width = tpr < 32 ? tpr : 32;
    for (int m = width >> 1; m > 0; m >>= 1) Acc::merge(st, Acc::shfl_xor(st, m));
    if (tpr > 32) {
      __syncthreads();  // the previous row's readers are done with warp_state
      if ((threadIdx.x & 31) == 0) warp_state[threadIdx.x >> 5] = st;
      __syncthreads();
      if (lane == 0)
        for (int w = 1; w < (tpr >> 5); ++w) Acc::merge(st, warp_state[(threadIdx.x >> 5) + w]);
    }
    if (lane == 0 && row < p.rows) kf_red_emit<Acc, Epi, TOut>(p, st, int64_t(out_off), sc);
  }
}

// Column path: a tile is bx consecutive vector columns in kept order — across outer indices where the kept inner
// dim is shorter than the tile (a channels-last conv's 24 channels: one outer index per tile left a warp 6
// columns); thread (tx, ty) accumulates its column over steps ty, ty + by, ... of split blockIdx.y's range; a
// shared-memory tree over ty.
template <class Pro, class Acc, class Epi, int kVec, typename IdxT, typename TOut, typename... TIn>
__global__ void __launch_bounds__(KF_RED_THREADS, kf_red_min_blocks<IdxT, false>())
    kf_reduce_cols_kernel(const KfRedParams<sizeof...(TIn), IdxT> p, const KfScalars sc) {
  constexpr int N = sizeof...(TIn);
  constexpr int kUnroll = kf_red_unroll<N, IdxT>();
  using State = typename Acc::State;
  __shared__ State part[kVec][KF_RED_THREADS];  // [j][thread]: consecutive threads hit consecutive words
  const Pro pro{};
  const int bx = 1 << p.group_log2;
  const int by = KF_RED_THREADS >> p.group_log2;
  const int tx = threadIdx.x & (bx - 1);
  const int ty = threadIdx.x >> p.group_log2;
  const IdxT r_begin = IdxT(blockIdx.y) * p.chunk;
  const IdxT r_end = kf_red_min<IdxT>(p.extent, r_begin + p.chunk);

  for (IdxT tile = blockIdx.x; tile < p.rows; tile += gridDim.x) {
    const IdxT lin = tile * IdxT(bx) + IdxT(tx);
    const bool active = lin < p.kept_vecs;
    const IdxT outer = p.cols_div.div(active ? lin : IdxT(0));
    const IdxT col = (active ? lin : IdxT(0)) - outer * p.cols;
    State st[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) st[j] = Acc::init();
    IdxT out_off = 0;
    if (active) {
      IdxT base[N];
#pragma unroll
      for (int k = 0; k < N; ++k) base[k] = 0;
      kf_red_peel<true>(outer * p.cols + col, p.nk, p.ksize, p.kdiv, p.kstride, p.kout, base, out_off);
      for (IdxT r = r_begin + ty; r < r_end; r += IdxT(by) * kUnroll) {
        KfRedRaw<kVec, TIn...> x[kUnroll];
        int64_t flat[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const IdxT ru = r + IdxT(u * by);
          flat[u] = 0;
          if (ru < r_end) {
            IdxT off[N];
#pragma unroll
            for (int k = 0; k < N; ++k) off[k] = base[k];
            kf_red_peel<Acc::kIndexed>(ru, p.nr, p.rsize, p.rdiv, p.rstride, p.rflat, off, flat[u]);
            kf_red_load_raw<kVec, TIn...>(p, off, x[u], std::index_sequence_for<TIn...>{});
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (r + IdxT(u * by) < r_end) {
            float xf[N][kVec];
            kf_red_to_float<kVec, TIn...>(x[u], xf, std::index_sequence_for<TIn...>{});
#pragma unroll
            for (int j = 0; j < kVec; ++j) Acc::push(st[j], kf_red_prologue<Pro>(pro, xf, j, sc), flat[u]);
          }
        }
      }
    }
    __syncthreads();  // the previous tile's tree is done with `part`
#pragma unroll
    for (int j = 0; j < kVec; ++j) part[j][threadIdx.x] = st[j];
    __syncthreads();
    for (int half = by >> 1; half > 0; half >>= 1) {
      if (ty < half) {
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          Acc::merge(st[j], part[j][threadIdx.x + half * bx]);
          part[j][threadIdx.x] = st[j];
        }
      }
      __syncthreads();
    }
    if (ty == 0 && active) {
#pragma unroll
      for (int j = 0; j < kVec; ++j) kf_red_emit<Acc, Epi, TOut>(p, st[j], int64_t(out_off) + j * p.out_inner, sc);
    }
  }
}

// Merges the `splits` partial states of each output (a group of 2^group_log2 <= 32 lanes per output, lane
// order fixed) and stores the final value. splits == 0 writes the empty reduction.
template <class Acc, class Epi, typename TOut>
__global__ void __launch_bounds__(KF_RED_THREADS)
    kf_reduce_finalize_kernel(const typename Acc::State* ws, int splits, int64_t num_out, void* out, int group_log2,
                              float count, const KfScalars sc) {
  using State = typename Acc::State;
  const int g = 1 << group_log2;
  const int lane = threadIdx.x & (g - 1);
  const int per_block = KF_RED_THREADS >> group_log2;
  for (int64_t o0 = int64_t(blockIdx.x) * per_block; o0 < num_out; o0 += int64_t(gridDim.x) * per_block) {
    const int64_t o = o0 + (threadIdx.x >> group_log2);
    State st = Acc::init();
    if (o < num_out)
      for (int s = lane; s < splits; s += g) Acc::merge(st, ws[int64_t(s) * num_out + o]);
    for (int m = g >> 1; m > 0; m >>= 1) Acc::merge(st, Acc::shfl_xor(st, m));
    if (lane == 0 && o < num_out) kf_red_store<Acc, Epi, TOut>(out, o, st, count, sc);
  }
}

// ---------------------------------------------------------------------------------------------- host

// The canonical iteration space (int64, innermost first) before it is narrowed to an index type.
struct KfRedPlan {
  int nk, nr;
  int64_t ksize[KF_MAX_DIMS], kstride[KF_RED_MAX_IN][KF_MAX_DIMS], kout[KF_MAX_DIMS];
  int64_t rsize[KF_MAX_DIMS], rstride[KF_RED_MAX_IN][KF_MAX_DIMS], rflat[KF_MAX_DIMS];
  bool rows;  // innermost dim reduced: row path; else column path
};

// Output and reduced element counts of a shape and mask; false when malformed.
inline bool kf_red_counts(const KfShape& shape, uint32_t mask, int64_t& num_out, int64_t& num_red) {
  if (shape.ndim < 0 || shape.ndim > KF_MAX_DIMS) return false;
  if (shape.ndim < 32 && (mask >> shape.ndim) != 0) return false;
  num_out = 1;
  num_red = 1;
  for (int d = 0; d < shape.ndim; ++d) {
    if (shape.size[d] < 0) return false;
    ((mask >> d) & 1u ? num_red : num_out) *= shape.size[d];
  }
  return true;
}

// Canonicalises a shape with no zero-size dims (see the header comment). n operands.
inline void kf_red_plan(const KfShape& shape, uint32_t mask, const KfTensorRef* in, int n, KfRedPlan& plan) {
  struct Dim {
    int64_t size, stride[KF_RED_MAX_IN], mult;  // mult: output step (kept) or flat-index step (reduced)
    bool red;
  };
  Dim dims[KF_MAX_DIMS];
  int nd = 0;
  int64_t out_step = 1, flat_step = 1;
  for (int d = shape.ndim - 1; d >= 0; --d) {  // multipliers are row-major over each kind in shape order
    const bool red = (mask >> d) & 1u;
    const int64_t size = shape.size[d];
    int64_t& step = red ? flat_step : out_step;
    if (size != 1) {
      Dim& dim = dims[nd++];
      dim.size = size;
      dim.red = red;
      dim.mult = step;
      for (int k = 0; k < n; ++k) dim.stride[k] = in[k].stride[d];
    }
    step *= size;
  }
  // dims[] is innermost first. The lead operand (most non-broadcast dims) decides the memory order.
  int lead = 0, best = -1;
  for (int k = 0; k < n; ++k) {
    int nz = 0;
    for (int d = 0; d < nd; ++d) nz += dims[d].stride[k] != 0;
    if (nz > best) best = nz, lead = k;
  }
  // Stable insertion sort, innermost first by the lead's stride; a broadcast (0) stride keeps its place.
  for (int i = 1; i < nd; ++i)
    for (int j = i; j > 0; --j) {
      const int64_t inner = dims[j - 1].stride[lead], outer = dims[j].stride[lead];
      if (inner == 0 || outer == 0 || outer >= inner) break;
      const Dim t = dims[j];
      dims[j] = dims[j - 1];
      dims[j - 1] = t;
    }
  // Merge neighbours of one kind whose strides and multipliers chain (inner dim j-1, outer dim j).
  int m = 0;
  for (int d = 0; d < nd; ++d) {
    if (m > 0) {
      Dim& in_dim = dims[m - 1];
      const Dim& out_dim = dims[d];
      bool chain = in_dim.red == out_dim.red && out_dim.mult == in_dim.mult * in_dim.size;
      for (int k = 0; k < n && chain; ++k) chain = out_dim.stride[k] == in_dim.stride[k] * in_dim.size;
      if (chain) {
        in_dim.size *= out_dim.size;
        continue;
      }
    }
    dims[m++] = dims[d];
  }
  plan.nk = plan.nr = 0;
  for (int d = 0; d < m; ++d) {
    const Dim& dim = dims[d];
    if (dim.red) {
      plan.rsize[plan.nr] = dim.size;
      plan.rflat[plan.nr] = dim.mult;
      for (int k = 0; k < n; ++k) plan.rstride[k][plan.nr] = dim.stride[k];
      ++plan.nr;
    } else {
      plan.ksize[plan.nk] = dim.size;
      plan.kout[plan.nk] = dim.mult;
      for (int k = 0; k < n; ++k) plan.kstride[k][plan.nk] = dim.stride[k];
      ++plan.nk;
    }
  }
  plan.rows = m > 0 && dims[0].red;
}

// True when every count and every reachable operand offset fits in a signed 32-bit int.
inline bool kf_red_fits_32bit(const KfRedPlan& plan, int n, int64_t num_out, int64_t num_red) {
  const int64_t lim = (int64_t(1) << 31) - 1;
  if (num_out > lim || num_red > lim) return false;
  for (int k = 0; k < n; ++k) {
    int64_t reach = 0;
    for (int d = 0; d < plan.nk; ++d) {
      if (plan.kstride[k][d] < 0) return false;
      reach += (plan.ksize[d] - 1) * plan.kstride[k][d];
    }
    for (int d = 0; d < plan.nr; ++d) {
      if (plan.rstride[k][d] < 0) return false;
      reach += (plan.rsize[d] - 1) * plan.rstride[k][d];
    }
    if (reach > lim) return false;
  }
  return true;
}

// Whether the vectorised dim (R[0] on the row path, K[0] on the column path) can be read in `vec`-element
// 16-byte words by every operand: contiguous or broadcast along it, its length a multiple of vec, and every
// vector an operand touches 16-byte aligned.
inline bool kf_red_vectorizable(const KfRedPlan& plan, const KfTensorRef* in, const int* elem_bytes, int n, int vec) {
  const int nv = plan.rows ? plan.nr : plan.nk;
  if (vec <= 1 || nv == 0) return false;
  const int64_t len = plan.rows ? plan.rsize[0] : plan.ksize[0];
  if (len % vec != 0) return false;
  for (int k = 0; k < n; ++k) {
    const int64_t inner = plan.rows ? plan.rstride[k][0] : plan.kstride[k][0];
    if (inner == 0) continue;
    const int word = vec * elem_bytes[k] < 16 ? vec * elem_bytes[k] : 16;  // a bool mask's word is narrower
    if (inner != 1 || reinterpret_cast<uintptr_t>(in[k].data) % word != 0) return false;
    for (int d = 0; d < plan.nk; ++d)
      if (!(!plan.rows && d == 0) && (plan.kstride[k][d] * elem_bytes[k]) % word != 0) return false;
    for (int d = 0; d < plan.nr; ++d)
      if (!(plan.rows && d == 0) && (plan.rstride[k][d] * elem_bytes[k]) % word != 0) return false;
  }
  return true;
}

// Whether rows that kf_red_vectorizable refuses (a length that is not a multiple of vec, rows starting
// between 16-byte boundaries) can still be read in vectors from a per-row boundary: one reduced dim,
// innermost; every operand contiguous or broadcast along it; the moving ones of one element size (16 / vec
// bytes) and co-aligned in every row (base pointers congruent mod 16, kept strides congruent mod vec), so one
// boundary serves them all. *lead is set to a moving operand.
inline bool kf_red_shiftable(const KfRedPlan& plan, const KfTensorRef* in, const int* elem_bytes, int n, int vec,
                             int* lead) {
  if (vec <= 1 || !plan.rows || plan.nr != 1 || plan.rsize[0] < 2 * vec) return false;
  *lead = -1;
  for (int k = 0; k < n; ++k) {
    const int64_t inner = plan.rstride[k][0];
    if (inner == 0) continue;
    if (inner != 1 || elem_bytes[k] * vec != 16) return false;
    if (*lead < 0) {
      *lead = k;
      continue;
    }
    if (reinterpret_cast<uintptr_t>(in[k].data) % 16 != reinterpret_cast<uintptr_t>(in[*lead].data) % 16) return false;
    for (int d = 0; d < plan.nk; ++d)
      if ((plan.kstride[k][d] - plan.kstride[*lead][d]) % vec != 0) return false;
  }
  return *lead >= 0;
}

template <class Acc>
size_t kf_reduce_workspace_bytes(const KfShape& shape, uint32_t reduce_mask) {
  int64_t num_out = 0, num_red = 0;
  if (!kf_red_counts(shape, reduce_mask, num_out, num_red) || num_out == 0 || num_red == 0) return 0;
  // A split under ~1K elements never pays for its partial; the partials stay a small fraction of the input.
  int64_t splits = num_red / 1024;
  if (splits > KF_RED_MAX_SPLITS) splits = KF_RED_MAX_SPLITS;
  if (splits > KF_RED_MAX_PARTIALS / num_out) splits = KF_RED_MAX_PARTIALS / num_out;
  if (splits < 2) return 0;
  return size_t(splits) * size_t(num_out) * sizeof(typename Acc::State);
}

template <class Acc, class Epi, typename TOut>
cudaError_t kf_red_finalize(const void* ws, int splits, int64_t num_out, void* out, float count, const KfScalars& sc,
                            cudaStream_t stream) {
  int g_log2 = 0;
  while (g_log2 < 5 && (1 << g_log2) < splits) ++g_log2;
  const int64_t per_block = KF_RED_THREADS >> g_log2;
  int64_t grid = kf_ceil_div(num_out, per_block);
  const int64_t cap = int64_t(kf_sm_count()) * 8;
  grid = grid < cap ? grid : cap;
  kf_reduce_finalize_kernel<Acc, Epi, TOut><<<dim3(unsigned(grid)), KF_RED_THREADS, 0, stream>>>(
      static_cast<const typename Acc::State*>(ws), splits, num_out, out, g_log2, count, sc);
  return cudaGetLastError();
}

// Splits of each of `blocks` independent blocks when they alone leave resident slots (`target`) idle: the
// count whose grid best fills its last wave, the fewest among equals, within the work (`by_work`: each thread
// keeps a few vectors per split), the workspace and KF_RED_MAX_SPLITS. Filling the slots exactly matters: a
// grid one block past a wave runs a second, nearly empty one (16 rows x 50 splits on 792 slots).
// Vectors a row-path thread takes before its row's threads merge: an accumulator's kRowVecsPerThread, else 4.
template <class Acc, class = void>
struct KfRowVecs { static constexpr int value = 4; };
template <class Acc>
struct KfRowVecs<Acc, std::void_t<decltype(Acc::kRowVecsPerThread)>> { static constexpr int value = Acc::kRowVecsPerThread; };
template <class Acc>
constexpr int64_t kf_red_row_vecs_per_thread() { return KfRowVecs<Acc>::value; }
// Steps a column-path thread takes along the reduction before the tree: an accumulator's kColStepsPerThread,
// else 1 (as many threads along the reduction as the block's shape allows).
template <class Acc, class = void>
struct KfColSteps { static constexpr int value = 1; };
template <class Acc>
struct KfColSteps<Acc, std::void_t<decltype(Acc::kColStepsPerThread)>> { static constexpr int value = Acc::kColStepsPerThread; };

inline int64_t kf_red_wave_splits(int64_t blocks, int64_t target, int64_t by_work, int64_t ws_splits) {
  int64_t cap = 2 * kf_ceil_div(target, blocks);
  cap = cap < by_work ? cap : by_work;
  cap = cap < ws_splits ? cap : ws_splits;
  cap = cap < KF_RED_MAX_SPLITS ? cap : KF_RED_MAX_SPLITS;
  int64_t best = 1, best_used = 0, best_slots = 1;
  for (int64_t s = 1; s <= cap; ++s) {
    const int64_t grid = blocks * s;
    const int64_t slots = kf_ceil_div(grid, target) * target;
    if (grid * best_slots > best_used * slots) {  // grid / slots > best_used / best_slots
      best = s;
      best_used = grid;
      best_slots = slots;
    }
  }
  return best;
}

template <class Pro, class Acc, class Epi, int kVec, typename IdxT, typename TOut, typename... TIn>
cudaError_t kf_red_run(const KfRedPlan& plan, int64_t num_out, int64_t num_red, void* out, const KfTensorRef* in,
                       const KfScalars& sc, void* ws, size_t ws_bytes, cudaStream_t stream, int shift_lead = -1) {
  constexpr int N = sizeof...(TIn);
  using State = typename Acc::State;
  KfRedParams<N, IdxT> p;
  for (int k = 0; k < N; ++k) p.in[k] = in[k].data;
  p.out = out;
  p.ws = ws;
  p.nk = plan.nk;
  p.nr = plan.nr;
  p.bcast_mask = 0;
  // The vectorised dim is counted in vectors: its size divided by kVec, its steps multiplied by kVec.
  for (int d = 0; d < plan.nk; ++d) {
    const int64_t v = (!plan.rows && d == 0) ? kVec : 1;
    p.ksize[d] = IdxT(plan.ksize[d] / v);
    p.kdiv[d] = KfIdxDiv<IdxT>::make(plan.ksize[d] / v);
    p.kout[d] = IdxT(plan.kout[d] * v);
    for (int k = 0; k < N; ++k) p.kstride[k][d] = IdxT(plan.kstride[k][d] * v);
  }
  for (int d = 0; d < plan.nr; ++d) {
    const int64_t v = (plan.rows && d == 0) ? kVec : 1;
    p.rsize[d] = IdxT(plan.rsize[d] / v);
    p.rdiv[d] = KfIdxDiv<IdxT>::make(plan.rsize[d] / v);
    p.rflat[d] = plan.rflat[d] * v;
    for (int k = 0; k < N; ++k) p.rstride[k][d] = IdxT(plan.rstride[k][d] * v);
  }
  for (int k = 0; k < N; ++k) {
    const bool inner_bcast = plan.rows ? plan.rstride[k][0] == 0 : (plan.nk > 0 && plan.kstride[k][0] == 0);
    if (kVec > 1 && inner_bcast) p.bcast_mask |= 1u << k;
  }
  p.num_out = num_out;
  p.count = float(num_red);
  p.inner_flat = plan.rows && plan.nr > 0 ? plan.rflat[0] : 0;
  p.shift_rows = shift_lead >= 0;
  p.lead = shift_lead >= 0 ? shift_lead : 0;
  p.lead_phase = shift_lead >= 0 ? int(reinterpret_cast<uintptr_t>(in[shift_lead].data) % 16 * kVec / 16) : 0;
  p.row_len = plan.rows && plan.nr > 0 ? IdxT(plan.rsize[0]) : IdxT(0);
  p.out_inner = !plan.rows && plan.nk > 0 ? plan.kout[0] : 0;

  // Splits the workspace can hold.
  const int64_t ws_splits = ws == nullptr ? 1 : int64_t(ws_bytes / (size_t(num_out) * sizeof(State)));
  const int sms = kf_sm_count();
  const int64_t kMinPerThread = 4;  // vectors (row path) or steps (column path) per thread and split
  int64_t splits = 1, grid_x = 1;

  if (plan.rows) {
    const int64_t kRowPerThread = kf_red_row_vecs_per_thread<Acc>();
    auto kernel = kf_reduce_rows_kernel<Pro, Acc, Epi, kVec, IdxT, TOut, TIn...>;
    static const int resident = kf_blocks_per_sm(kernel, KF_RED_THREADS, 0);
    const int64_t target_blocks = int64_t(sms) * resident;
    const int64_t extent = num_red / kVec;
    // ~4 vectors per thread (more where merges are dear); widened while the rows alone leave the GPU idle.
    int64_t tpr = kf_next_pow2(kf_ceil_div(extent, kRowPerThread));
    tpr = tpr > KF_RED_THREADS ? KF_RED_THREADS : tpr;
    while (tpr < KF_RED_THREADS && tpr < extent && num_out * tpr < target_blocks * KF_RED_THREADS) tpr *= 2;
    const int64_t rows_per_block = KF_RED_THREADS / tpr;
    const int64_t row_blocks = kf_ceil_div(num_out, rows_per_block);
    if (row_blocks < target_blocks)
      splits = kf_red_wave_splits(row_blocks, target_blocks, kf_ceil_div(extent, tpr * kRowPerThread), ws_splits);
    p.chunk = IdxT(kf_ceil_div(extent, splits));
    splits = kf_ceil_div(extent, int64_t(p.chunk));
    p.rows = IdxT(num_out);
    p.extent = IdxT(extent);
    p.group_log2 = 0;
    while ((int64_t(1) << p.group_log2) < tpr) ++p.group_log2;
    grid_x = row_blocks < target_blocks ? row_blocks : target_blocks;
    kernel<<<dim3(unsigned(grid_x), unsigned(splits)), KF_RED_THREADS, 0, stream>>>(p, sc);
  } else {
    auto kernel = kf_reduce_cols_kernel<Pro, Acc, Epi, kVec, IdxT, TOut, TIn...>;
    static const int resident = kf_blocks_per_sm(kernel, KF_RED_THREADS, 0);
    const int64_t target_blocks = int64_t(sms) * resident;
    const int64_t cols = plan.nk > 0 ? plan.ksize[0] / kVec : 1;
    const int64_t outer = plan.nk > 0 ? num_out / plan.ksize[0] : 1;
    // Warps along the kept columns read whole segments; the rest of the block goes along the reduction.
    const int64_t kept_vecs = outer * cols;
    int64_t bx = kf_next_pow2(kept_vecs);
    bx = bx < 32 ? bx : 32;
    int64_t by = kf_next_pow2(kf_ceil_div(num_red, KfColSteps<Acc>::value));
    by = by < KF_RED_THREADS / bx ? by : KF_RED_THREADS / bx;
    bx = KF_RED_THREADS / by;
    const int64_t tiles = kf_ceil_div(kept_vecs, bx);
    if (tiles < target_blocks)
      splits = kf_red_wave_splits(tiles, target_blocks, kf_ceil_div(num_red, by * kMinPerThread), ws_splits);
    p.chunk = IdxT(kf_ceil_div(num_red, splits));
    splits = kf_ceil_div(num_red, int64_t(p.chunk));
    p.rows = IdxT(tiles);
    p.extent = IdxT(num_red);
    p.cols = IdxT(cols);
    p.cols_div = KfIdxDiv<IdxT>::make(cols);
    p.kept_vecs = IdxT(kept_vecs);
    p.group_log2 = 0;
    while ((int64_t(1) << p.group_log2) < bx) ++p.group_log2;
    grid_x = tiles < target_blocks ? tiles : target_blocks;
    kernel<<<dim3(unsigned(grid_x), unsigned(splits)), KF_RED_THREADS, 0, stream>>>(p, sc);
  }
  KF_RETURN_IF_ERROR(cudaGetLastError());
  if (splits > 1) return kf_red_finalize<Acc, Epi, TOut>(ws, int(splits), num_out, out, float(num_red), sc, stream);
  return cudaSuccess;
}

template <class Pro, class Acc, class Epi, typename TOut, typename... TIn>
cudaError_t kf_launch_reduce(const KfShape& shape, uint32_t reduce_mask, void* out, const KfTensorRef* in,
                             const KfScalars& sc, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  constexpr int N = sizeof...(TIn);
  static_assert(N == Pro::kIn, "one input type per prologue input");
  static_assert(N >= 1 && N <= KF_RED_MAX_IN, "1..8 inputs");
  static_assert(!std::is_same<TOut, int64_t>::value || Acc::kIndexed, "an int64 output holds an arg index");
  int64_t num_out = 0, num_red = 0;
  if (!kf_red_counts(shape, reduce_mask, num_out, num_red)) return cudaErrorInvalidValue;
  if (num_out == 0) return cudaSuccess;
  if (num_red == 0) return kf_red_finalize<Acc, Epi, TOut>(nullptr, 0, num_out, out, 0.f, sc, stream);
  KfRedPlan plan;
  kf_red_plan(shape, reduce_mask, in, N, plan);
  const int elem_bytes[N] = {int(sizeof(TIn))...};
  constexpr int kVec = int(16 / kf_min_size<TIn...>());
  const bool vec = kf_red_vectorizable(plan, in, elem_bytes, N, kVec);
  int lead = -1;
  if (kf_red_fits_32bit(plan, N, num_out, num_red)) {
    if (vec || kf_red_shiftable(plan, in, elem_bytes, N, kVec, &lead))
      return kf_red_run<Pro, Acc, Epi, kVec, uint32_t, TOut, TIn...>(plan, num_out, num_red, out, in, sc, workspace,
                                                                      workspace_bytes, stream, vec ? -1 : lead);
    return kf_red_run<Pro, Acc, Epi, 1, uint32_t, TOut, TIn...>(plan, num_out, num_red, out, in, sc, workspace, workspace_bytes, stream);
  }
  // Past 2^31 elements or offsets (rare): scalar loads only, which keeps the kernels per region at 7.
  return kf_red_run<Pro, Acc, Epi, 1, int64_t, TOut, TIn...>(plan, num_out, num_red, out, in, sc, workspace, workspace_bytes, stream);
}
