// kf_normalize_cl.cuh — a normalisation whose input is transposed against its output: a channels-last
// convolution's result normalised (BatchNorm, InstanceNorm, LayerNorm over [C, H, W], ...) into a result in
// the reference's NCHW layout. The statistics read the input in its own memory order (for BatchNorm the
// channel is then the contiguous kept dim: the column kernel); the apply is one elementwise pass through the
// elementwise template's tiled transpose, with the statistics as three more broadcast operands, so the
// conv's output is read twice and the result written once — never transposed into a copy of its own.
//
//   size_t kf_normalize_cl_workspace_bytes<Stat>(shape, reduce_mask)
//   cudaError_t kf_launch_normalize_cl<Pro, Stat, Apply, TOut, TIn...>(shape, reduce_mask, out, in, sc,
//                                       stats_out, workspace, workspace_bytes, stream)
//   The arguments, results and functors of kf_launch_normalize (kf_normalize.cuh); the workspace comes from
//   kf_normalize_cl_workspace_bytes. It takes this path when input 0 is transposed against the output (its
//   innermost iteration dim is not its contiguous one), ordering the dims by input 0's strides keeps the kept
//   dims in their order (the statistics' index is the same either way), the apply has room for three more
//   operands (NIn + 3 <= KF_EW_MAX_IN) and the elementwise template would tile it with a reduced dim along
//   its runs — if need be with the statistics spread along a short reduced dim (spread_dim: group norm's
//   channels of a group); otherwise it is kf_launch_normalize. Deterministic: the statistics kernels' fixed trees.
#pragma once
#include "kf_elementwise.cuh"
#include "kf_normalize.cuh"

// The apply of kf_launch_normalize as a pointwise functor: the statistics a, b, count are its last inputs.
template <class Pro, class Apply, int NIn>
struct KfNormApplyFromStats {
  static constexpr int kIn = NIn + 3;
  __device__ __forceinline__ float operator()(const float (&x)[NIn + 3], const KfScalars& sc) const {
    float xi[NIn];
#pragma unroll
    for (int i = 0; i < NIn; ++i) xi[i] = x[i];
    const KfStats s{x[NIn], x[NIn + 1], x[NIn + 2]};
    return Apply{}(Pro{}(xi, sc), s, xi, sc);
  }
};

namespace kf_norm_cl {

// The problem with its dims ordered as input 0 lies in memory (largest stride first; size-1 dims dropped).
// False when that is not a transposition worth taking: input 0 already contiguous along the innermost
// iteration dim, broadcast somewhere, or the kept dims would change order.
template <int NIn>
inline bool memory_order(const KfShape& shape, uint32_t mask, const KfTensorRef* in, KfShape& pshape,
                         uint32_t& pmask, KfTensorRef (&pin)[NIn]) {
  int dims[KF_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < shape.ndim; ++d) {
    if (shape.size[d] == 1) continue;
    if (in[0].stride[d] == 0) return false;
    dims[n++] = d;
  }
  if (n < 2 || in[0].stride[dims[n - 1]] == 1) return false;
  // Stable insertion sort by input 0's stride, largest first.
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && in[0].stride[dims[j]] > in[0].stride[dims[j - 1]]; --j) {
      const int t = dims[j];
      dims[j] = dims[j - 1];
      dims[j - 1] = t;
    }
  if (in[0].stride[dims[n - 1]] != 1) return false;
  int last_kept = -1;
  for (int i = 0; i < n; ++i) {
    if ((mask >> dims[i]) & 1u) continue;
    if (dims[i] < last_kept) return false;
    last_kept = dims[i];
  }
  pshape.ndim = n;
  pmask = 0;
  for (int i = 0; i < n; ++i) {
    pshape.size[i] = shape.size[dims[i]];
    if ((mask >> dims[i]) & 1u) pmask |= 1u << i;
  }
  for (int k = 0; k < NIn; ++k) {
    pin[k].data = in[k].data;
    for (int i = 0; i < n; ++i) pin[k].stride[i] = in[k].stride[dims[i]];
  }
  return true;
}

// Statistics indexed over the kept dims plus at most one reduced dim `spread` (-1: none), at float offset 3i
// of `stats` for that index i, as strides per iteration dim.
inline void stats_refs(const KfShape& shape, uint32_t mask, int spread, const KfStats* stats,
                       KfTensorRef (&ref)[3]) {
  int64_t weight = 1;
  for (int d = shape.ndim - 1; d >= 0; --d) {
    const bool indexed = !((mask >> d) & 1u) || d == spread;
    for (auto& r : ref) r.stride[d] = indexed ? 3 * weight : 0;
    if (indexed) weight *= shape.size[d];
  }
  for (int j = 0; j < 3; ++j) ref[j].data = reinterpret_cast<const float*>(stats) + j;
}

// A reduced dim this short, contiguous in input 0 (group norm's channels within a group, channels-last), is
// too short for the tiled apply's staged side: the statistics are spread along it (copied per element of it)
// so that it merges with its kept neighbour (the groups) into one long dim.
constexpr int64_t kMaxSpread = 16;

// The input-0-contiguous reduced dim to spread the statistics along, or -1.
inline int spread_dim(const KfShape& shape, uint32_t mask, const KfTensorRef& in0) {
  for (int d = 0; d < shape.ndim; ++d)
    if (shape.size[d] > 1 && in0.stride[d] == 1)
      return ((mask >> d) & 1u) && shape.size[d] < kMaxSpread ? d : -1;
  return -1;
}

// out[e] = stats[k(e)] for the index e over kept dims + the spread dim: the spread coordinate dropped. `inner`
// is the product of the kept sizes inside the spread dim, `len` its size.
__global__ void __launch_bounds__(kf_norm::kStreamThreads)
spread_stats_kernel(const KfStats* stats, KfStats* out, int64_t count, int64_t inner, int64_t len) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x)
    out[e] = stats[e / (inner * len) * inner + e % inner];
}


// The statistics of a problem already in input 0's memory order (pshape, pmask, pin), final in `stats` (and
// `stats_out` when not null); partials in `partial` (room for `partial_capacity`); `aligned` is any 16-byte
// aligned pointer (the kernels' views need an output; none is written).
template <class Pro, class Stat, class Apply, typename TOut, typename... TIn>
cudaError_t stats_in_memory_order(const KfShape& pshape, uint32_t pmask, const KfTensorRef* pin, const KfScalars& sc,
                                  KfStats* stats, KfStats* stats_dst, KfStats* partial, int64_t partial_capacity,
                                  void* aligned, cudaStream_t stream) {
  using namespace kf_norm;
  constexpr int NIn = sizeof...(TIn);
  const Extent e = extent(pshape, pmask);
  const int sms = kf_sm_count();
  const SplitPlan split = split_plan(e, sms);
  if (e.K * split.splits > partial_capacity && split.splits > 1) return cudaErrorInvalidValue;
  int64_t splits = split.splits;
  View<NIn> v;
  make_view(pshape, pmask, pin, aligned, v);
  constexpr int kVec = int(16 / kf_min_size<TOut, TIn...>());
  constexpr int kStreamVec = NIn * kVec <= 32 ? kVec : 1;
  // Rows whose innermost reduced dim is shorter than a warp (group norm's channels of one group, contiguous in
  // channels-last memory) read it as columns: partials per (kept index, element of that dim, split), which
  // are consecutive per kept index, so the finalize merges them as that index's splits.
  const int last = pshape.ndim - 1;
  const int64_t len = pshape.size[last];
  int64_t col_splits = 0;
  if (e.reduced_inner && ((pmask >> last) & 1u) && len < kColLanes && e.R > len) {
    const Extent ce = extent(pshape, pmask & ~(1u << last));
    col_splits = split_plan(ce, sms).splits;
    col_splits = col_splits < 2 ? 2 : col_splits;  // >= 2: the column kernel then leaves raw partials
    const int64_t fit = partial_capacity / (e.K * len);
    col_splits = col_splits < fit ? col_splits : fit;
  }
  if (col_splits >= 2) {
    View<NIn> cv;
    make_view(pshape, pmask & ~(1u << last), pin, aligned, cv);
    KF_RETURN_IF_ERROR((launch_columns<Pro, Stat, Apply, TOut, TIn...>(cv, pin, aligned, col_splits,
                                                                      partial_capacity, sc, partial, nullptr,
                                                                      nullptr, stream, true)));
    if (col_splits < 2) return cudaErrorInvalidValue;  // the finalize below reads raw partials
    KF_RETURN_IF_ERROR(launch_finalize<Stat>(e.K, len * col_splits, e.R, partial, stats, stats_dst, stream));
  } else if (e.reduced_inner) {
    if (kStreamVec > 1 && inner_vectorizable<kStreamVec>(v, pin, aligned))
      row_partial_vec_kernel<Pro, Stat, kStreamVec, TIn...>
          <<<grid_for(e.K * split.splits), kStreamThreads, 0, stream>>>(
              v, KfFastDiv::make(uint64_t(split.splits)), sc, partial, stats, stats_dst);
    else
      row_partial_kernel<Pro, Stat, TIn...><<<grid_for(e.K * split.splits), kStreamThreads, 0, stream>>>(
          v, KfFastDiv::make(uint64_t(split.splits)), sc, partial, stats, stats_dst);
  } else {
    KF_RETURN_IF_ERROR((launch_columns<Pro, Stat, Apply, TOut, TIn...>(v, pin, aligned, splits, partial_capacity, sc,
                                                                      partial, stats_dst, stats, stream)));
  }
  if (col_splits < 2) {
    KF_RETURN_IF_ERROR(cudaGetLastError());
    if (splits > 1) KF_RETURN_IF_ERROR(launch_finalize<Stat>(e.K, splits, e.R, partial, stats, stats_dst, stream));
  }
  return cudaSuccess;
}

}  // namespace kf_norm_cl

template <class Stat>
size_t kf_normalize_cl_workspace_bytes(const KfShape& shape, uint32_t reduce_mask) {
  using namespace kf_norm;
  Extent e = extent(shape, reduce_mask);
  if (!e.ok || e.K * e.R == 0) return 0;
  const int sms = kf_sm_count();
  // Either family may read the permuted problem; final statistics are always stored (K), then partials.
  int64_t splits = 1;
  for (bool inner : {true, false}) {
    e.reduced_inner = inner;
    for (int64_t cols : {int64_t(kColLanes), int64_t(kColLanes) * kColVecMax}) {
      const int64_t s = split_plan(e, sms, cols).splits;
      splits = s > splits ? s : splits;
    }
  }
  const size_t own = size_t(e.K) * (splits + 1 + kf_norm_cl::kMaxSpread) * sizeof(KfStats);
  const size_t fallback = kf_normalize_workspace_bytes<Stat>(shape, reduce_mask);
  return own > fallback ? own : fallback;
}

template <class Pro, class Stat, class Apply, typename TOut, typename... TIn>
cudaError_t kf_launch_normalize_cl(const KfShape& shape, uint32_t reduce_mask, void* out, const KfTensorRef* in,
                                   const KfScalars& sc, float* stats_out, void* workspace, size_t workspace_bytes,
                                   cudaStream_t stream) {
  using namespace kf_norm;
  constexpr int NIn = sizeof...(TIn);
  const auto fallback = [&] {
    return kf_launch_normalize<Pro, Stat, Apply, TOut, TIn...>(shape, reduce_mask, out, in, sc, stats_out,
                                                               workspace, workspace_bytes, stream);
  };
  if constexpr (NIn + 3 > KF_EW_MAX_IN) {
    return fallback();
  } else {
    const Extent e = extent(shape, reduce_mask);
    if (!e.ok) return cudaErrorInvalidValue;
    if (e.K * e.R == 0) return cudaSuccess;
    if (out == nullptr || in == nullptr) return cudaErrorInvalidValue;
    KfShape pshape;
    uint32_t pmask;
    KfTensorRef pin[NIn];
    if (!kf_norm_cl::memory_order<NIn>(shape, reduce_mask, in, pshape, pmask, pin)) return fallback();
    if (workspace == nullptr || workspace_bytes < kf_normalize_cl_workspace_bytes<Stat>(shape, reduce_mask))
      return cudaErrorInvalidValue;
    // Workspace: final statistics (K), statistics spread for the apply (K * kMaxSpread), partials.
    KfStats* stats = reinterpret_cast<KfStats*>(workspace);
    KfStats* spread_stats = stats + e.K;
    KfStats* partial = spread_stats + e.K * kf_norm_cl::kMaxSpread;
    const int64_t partial_capacity =
        int64_t(workspace_bytes / sizeof(KfStats)) - e.K * (1 + kf_norm_cl::kMaxSpread);

    // The apply's plan first: only a tiled apply is worth the statistics' own pass.
    KfTensorRef apply_in[NIn + 3];
    for (int k = 0; k < NIn; ++k) apply_in[k] = in[k];
    KfEwPlan plan;
    int slot[NIn + 3];
    const auto tiles = [&](int spread) {
      KfTensorRef stat_refs[3];
      kf_norm_cl::stats_refs(shape, reduce_mask, spread, spread < 0 ? stats : spread_stats, stat_refs);
      for (int j = 0; j < 3; ++j) apply_in[NIn + j] = stat_refs[j];
      return kf_ew_coalesce(shape, apply_in, NIn + 3, plan) && kf_ew_fits_32bit(plan, NIn + 3) &&
             kf_ew_tiled_operands(plan, NIn + 3, slot) > 0;
    };
    int spread = -1;
    if (!tiles(-1)) {
      spread = kf_norm_cl::spread_dim(shape, reduce_mask, in[0]);
      if (spread < 0 || !tiles(spread)) return fallback();
    }
    // The tiled kernel's runs go along plan dim 0; a reduced dim there gives each run one kept index, so
    // the statistics load once per run and Apply's math on them alone runs once (kUniform0).
    if (plan.stride[NIn][0] != 0) return fallback();

    KF_RETURN_IF_ERROR((kf_norm_cl::stats_in_memory_order<Pro, Stat, Apply, TOut, TIn...>(
        pshape, pmask, pin, sc, stats, reinterpret_cast<KfStats*>(stats_out), partial, partial_capacity, workspace,
        stream)));
    if (spread >= 0) {
      int64_t inner = 1;
      for (int d = spread + 1; d < shape.ndim; ++d)
        if (!((reduce_mask >> d) & 1u)) inner *= shape.size[d];
      const int64_t count = e.K * shape.size[spread];
      kf_norm_cl::spread_stats_kernel<<<grid_for(ceil_div(count, kStreamThreads)), kStreamThreads, 0, stream>>>(
          stats, spread_stats, count, inner, shape.size[spread]);
      KF_RETURN_IF_ERROR(cudaGetLastError());
    }
    constexpr uint32_t kStatsOperands = 7u << NIn;
    return kf_ew_run_tiled<KfNormApplyFromStats<Pro, Apply, NIn>, kStatsOperands, TOut, TIn..., float, float, float>(
        plan, slot, out, apply_in, sc, stream);
  }
}

// ---------------------------------------------------------------------------------------------- statistics only
// The statistics of kf_launch_normalize alone, for an apply that runs inside another kernel (a reduction's
// prologue: group norm then a logsumexp over channels, the normalised tensor never written).
//   size_t kf_normalize_stats_workspace_bytes<Stat>(shape, reduce_mask)
//   cudaError_t kf_launch_normalize_stats<Pro, Stat, TIn...>(shape, reduce_mask, in, sc, stats, workspace,
//                                                            workspace_bytes, stream)
//   stats: float[3] {a, b, count} per kept index, kept dims in their order (as kf_launch_normalize's stats_out),
//   required. Read in input 0's memory order when that keeps the kept dims' order, else in the shape's.
namespace kf_norm_cl {
template <int N>
struct NoApply {  // the column kernel's apply, never reached with statistics-only output
  static constexpr int kIn = N;
  __device__ __forceinline__ float operator()(float v, const KfStats&, const float (&)[N], const KfScalars&) const {
    return v;
  }
};
}  // namespace kf_norm_cl

template <class Stat>
size_t kf_normalize_stats_workspace_bytes(const KfShape& shape, uint32_t reduce_mask) {
  return kf_normalize_cl_workspace_bytes<Stat>(shape, reduce_mask);
}

template <class Pro, class Stat, typename... TIn>
cudaError_t kf_launch_normalize_stats(const KfShape& shape, uint32_t reduce_mask, const KfTensorRef* in,
                                      const KfScalars& sc, float* stats, void* workspace, size_t workspace_bytes,
                                      cudaStream_t stream) {
  using namespace kf_norm;
  constexpr int NIn = sizeof...(TIn);
  static_assert(NIn >= 1 && Pro::kIn == NIn, "kf_launch_normalize_stats: Pro::kIn == sizeof...(TIn) >= 1");
  const Extent e = extent(shape, reduce_mask);
  if (!e.ok) return cudaErrorInvalidValue;
  if (e.K * e.R == 0) return cudaSuccess;
  if (in == nullptr || stats == nullptr || workspace == nullptr ||
      workspace_bytes < kf_normalize_stats_workspace_bytes<Stat>(shape, reduce_mask))
    return cudaErrorInvalidValue;
  KfShape pshape;
  uint32_t pmask;
  KfTensorRef pin[NIn];
  if (!kf_norm_cl::memory_order<NIn>(shape, reduce_mask, in, pshape, pmask, pin)) {
    pshape = shape;
    pmask = reduce_mask;
    for (int k = 0; k < NIn; ++k) pin[k] = in[k];
  }
  KfStats* partial = reinterpret_cast<KfStats*>(workspace);
  const int64_t capacity = int64_t(workspace_bytes / sizeof(KfStats));
  KfStats* final_stats = reinterpret_cast<KfStats*>(stats);
  return kf_norm_cl::stats_in_memory_order<Pro, Stat, kf_norm_cl::NoApply<NIn>, float, TIn...>(
      pshape, pmask, pin, sc, final_stats, nullptr, partial, capacity, workspace, stream);
}

