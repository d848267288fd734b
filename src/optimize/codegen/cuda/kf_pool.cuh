// kf_pool.cuh — max / avg pooling over 1-3 spatial dims (plain or adaptive) of a contiguous N x C x (D x)(H x)W
// input, with a generated pointwise epilogue fused on the pooled value.
//
// ---------------------------------------------------------------------------------------------- contract
//   struct KfPoolParams — kf_pool_params.h (host-includable). Spatial arrays (in_size, out_size, kernel, stride, pad, dilation) hold
//     the nd spatial dims outermost first (nd = 2: [H, W]); entries past nd are ignored. out_size is the
//     caller's (ceil_mode is the caller computing out_size the way torch does).
//   Prologue functor (generated), applied to every input tap before it is pooled (padding taps are skipped,
//   never passed through it, as torch pads the prologue's output):
//     struct Pro { static constexpr int kIn = N;    // the epilogue's N: one operand list serves both
//                  __device__ float operator()(float tap, const float (&x)[kf_slots(kIn)],
//                                              const KfScalars& sc) const; };
//     x is loaded at the output element, so a prologue may read only operands constant over a window (size 1
//     on every spatial dim: per-channel parameters, scalars); the planner keeps others out. KfPoolNoPrologue
//     is the identity (no loads, no math).
//   Epilogue functor (generated; extra inputs are loaded at the OUTPUT element):
//     struct Epi { static constexpr int kIn = N;    // N >= 0
//                  __device__ float operator()(float pooled, const float (&x)[kf_slots(kIn)],
//                                              const KfScalars& sc) const; };
//     kf_slots(N) = max(N, 1): with kIn == 0 the functor takes `const float (&x)[1]` and must not read it.
//   cudaError_t kf_launch_pool<Kind, Pro, Epi, TOut, TIn, TExtra...>(p, in, out, extra, sc, stream)
//     Kind    KF_POOL_MAX or KF_POOL_AVG; sizeof...(TExtra) == Epi::kIn (== Pro::kIn unless Pro is
//             KfPoolNoPrologue).
//     in      contiguous [N, C, in_size...] of TIn;  out: contiguous [N, C, out_size...] of TOut.
//     extra   Epi::kIn views over the output shape [N, C, out_size...] (2 + nd strides, 0 = broadcast);
//             may be null when kIn == 0.
//   Semantics are torch's:
//     max  windows start at o*stride - pad, taps dilation apart; taps outside the input are skipped (-inf
//          padding); NaN propagates (a NaN tap makes the output NaN). An all-padding window gives -inf.
//     avg  window [o*stride - pad, +kernel) clipped to [-pad, in + pad) gives pool_size; clipped to the input
//          gives the taps. divisor = divisor_override if non-zero, else pool_size if count_include_pad, else
//          the number of taps; a window with no taps (ceil_mode edge) gives 0. avg requires dilation 1
//          (torch's avg_pool has none).
//     adaptive (either kind): window [floor(o*in/out), ceil((o+1)*in/out)); avg divides by its size.
//   Returns cudaErrorInvalidValue for a bad nd / size / kernel / stride / dilation / pad, the launch error
//   otherwise. Zero-size outputs are a no-op.
//
//   kf_launch_pool_fixed<Kind, KD, KH, KW, SH, Pro, Epi, TOut, TIn, TExtra...>: the same contract, faster where
//   the window is known when the file is generated (kernel KD x KH x KW, H stride SH, not adaptive; 1-D and
//   2-D pools pass 1 for the missing leading dims); any other params (or an H dilation where rows are
//   shared) take the generic kernel, so the result never depends on which one ran.
//
// ---------------------------------------------------------------------------------------------- kernels
// Generic: one thread per output element, consecutive threads along W (coalesced stores; window loads of a
// warp cover a stride-wide contiguous span, the taps overlapping in L1). Output index decomposition uses
// KfFastDiv (no hardware divide). 1-D and 2-D run as 3-D with leading unit dims.
// Fixed window: consecutive threads make consecutive outputs of a row (every tap load coalesced), and each
// thread makes up to 4 outputs of one column, loading the input rows their windows share once (3x3 stride 1:
// 6 rows of 3 taps for 4 outputs instead of 12 rows); every tap loop is unrolled, plane offsets are 32-bit.
#pragma once
#include <math.h>
#include <type_traits>
#include "kf_pack.cuh"
#include "kf_pool_params.h"

// The pool of the input itself: no prologue.
struct KfPoolNoPrologue {
  static constexpr int kIn = 0;
  template <int N>
  __device__ __forceinline__ float operator()(float tap, const float (&)[N], const KfScalars&) const { return tap; }
};


namespace kf_pool {

constexpr int kThreads = 256;

// The launch as the kernel sees it: always 3 spatial dims (outermost first), extras over [N, C, D, H, W].
template <int NX>
struct Geom {
  int64_t NC;
  int64_t in[3], out[3];
  int k[3], s[3], p[3], dl[3];
  bool count_include_pad, adaptive;
  int divisor_override;
  int64_t total;
  KfFastDiv odiv[3];  // output D, H, W
  KfFastDiv cdiv;     // C: splits the N*C index for the extras
  int64_t xstride[NX][5];
  const void* x[NX];
};

// Window of output coordinate o along one dim: first tap, tap count, tap spacing.
struct Window {
  int64_t start;
  int taps;  // a window's taps and spacing fit an int; 64-bit ones cost the generic kernel registers
  int step;
};

template <int NX>
__device__ __forceinline__ Window window(const Geom<NX>& g, int d, int64_t o) {
  if (g.adaptive) {
    const int64_t start = (o * g.in[d]) / g.out[d];
    const int64_t end = ((o + 1) * g.in[d] + g.out[d] - 1) / g.out[d];
    return {start, int(end - start), 1};
  }
  return {o * g.s[d] - g.p[d], g.k[d], g.dl[d]};
}

// The offsets of the first N extras at element (n, c, od, oh, ow).
template <int N, int NX>
__device__ __forceinline__ void extra_offsets(const Geom<NX>& g, int64_t n, int64_t c, int64_t od, int64_t oh,
                                              int64_t ow, int64_t (&off)[NX]) {
  const int64_t coord[5] = {n, c, od, oh, ow};
#pragma unroll
  for (int i = 0; i < N; ++i) {
    off[i] = 0;
#pragma unroll
    for (int d = 0; d < 5; ++d) off[i] += coord[d] * g.xstride[i][d];
  }
}

// The extra inputs (the prologue's and epilogue's) at output element (nc, od, oh, ow), as fp32 slots.
template <typename... TExtra, int NX>
__device__ __forceinline__ void load_extras(const Geom<NX>& g, int64_t nc, int64_t od, int64_t oh, int64_t ow,
                                            float (&x)[NX]) {
  x[0] = 0.f;
  if (sizeof...(TExtra) > 0) {
    const int64_t n = int64_t(g.cdiv.div(uint64_t(nc)));
    int64_t off[NX];
    extra_offsets<sizeof...(TExtra)>(g, n, nc - n * int64_t(g.cdiv.d), od, oh, ow, off);
    KfLoadPack<0, TExtra...>::load(x, g.x, off);
  }
}

// The extra inputs for kVec consecutive channels c.. of output (n, od, oh, ow): the offsets computed once and
// stepped along C.
template <int kVec, typename... TExtra, int NX>
__device__ __forceinline__ void load_extras_channels(const Geom<NX>& g, int64_t n, int64_t c, int64_t od,
                                                     int64_t oh, int64_t ow, float (&x)[kVec][NX]) {
#pragma unroll
  for (int k = 0; k < kVec; ++k) x[k][0] = 0.f;
  if (sizeof...(TExtra) > 0) {
    int64_t off[NX];
    extra_offsets<sizeof...(TExtra)>(g, n, c, od, oh, ow, off);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      KfLoadPack<0, TExtra...>::load(x[k], g.x, off);
#pragma unroll
      for (int i = 0; i < int(sizeof...(TExtra)); ++i) off[i] += g.xstride[i][1];
    }
  }
}

template <class Pro>
constexpr bool kHasPrologue = !std::is_same<Pro, KfPoolNoPrologue>::value;

// The pooled value of one output's windows (wd, wh, ww) over the plane at `src`, element (id, ih, iw) at
// ((id * H + ih) * W + iw) * step (1: the reference's layout; C: channels-last), every tap through the prologue.
template <int Kind, class Pro, typename TIn, int NX>
__device__ __forceinline__ float pool_window(const Geom<NX>& g, const TIn* __restrict__ src, int64_t step,
                                             const Window& wd, const Window& wh, const Window& ww,
                                             const float (&x)[NX], const KfScalars& sc) {
  const Pro pro;
  if (Kind == KF_POOL_MAX) {
    float pooled = -INFINITY;
    for (int a = 0; a < wd.taps; ++a) {
      const int64_t id = wd.start + a * wd.step;
      if (id < 0 || id >= g.in[0]) continue;
      for (int b = 0; b < wh.taps; ++b) {
        const int64_t ih = wh.start + b * wh.step;
        if (ih < 0 || ih >= g.in[1]) continue;
        const TIn* line = src + (id * g.in[1] + ih) * g.in[2] * step;
        for (int c = 0; c < ww.taps; ++c) {
          const int64_t iw = ww.start + c * ww.step;
          if (iw < 0 || iw >= g.in[2]) continue;
          const float val = pro(kf_to_float<TIn>(line[iw * step]), x, sc);
          if (val > pooled || isnan(val)) pooled = val;  // torch's rule: a NaN tap wins and stays
        }
      }
    }
    return pooled;
  }
  // Taps clipped to the input; pool_size (count_include_pad) clipped only to the padded extent.
  int64_t lo[3], hi[3], padded = 1, taps = 1;
#pragma unroll
  for (int d = 0; d < 3; ++d) {
    const Window w = d == 0 ? wd : d == 1 ? wh : ww;
    int64_t end = w.start + w.taps;
    if (!g.adaptive) {
      const int64_t limit = g.in[d] + g.p[d];
      if (end > limit) end = limit;
      padded *= end - w.start;
    }
    lo[d] = w.start > 0 ? w.start : 0;
    hi[d] = end < g.in[d] ? end : g.in[d];
    taps *= hi[d] > lo[d] ? hi[d] - lo[d] : 0;
  }
  float sum = 0.f;
  for (int64_t id = lo[0]; id < hi[0]; ++id)
    for (int64_t ih = lo[1]; ih < hi[1]; ++ih) {
      const TIn* line = src + (id * g.in[1] + ih) * g.in[2] * step;
      for (int64_t iw = lo[2]; iw < hi[2]; ++iw) sum += pro(kf_to_float<TIn>(line[iw * step]), x, sc);
    }
  int64_t divisor = taps;
  if (!g.adaptive) divisor = g.divisor_override != 0 ? g.divisor_override : g.count_include_pad ? padded : taps;
  return taps == 0 ? 0.f : sum / float(divisor);
}

// Launch bounds with 4 blocks per SM (a 64-register ceiling): with the thread count alone, ptxas held the kernel to
// 32-40 registers and spilled once a prologue or an epilogue had math (exp, a divide, bf16 hardswish), where about
// 40 registers without spills is what it needs.
template <int Kind, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
__global__ void __launch_bounds__(kThreads, 4)
pool_kernel(const Geom<kf_slots(sizeof...(TExtra))> g, const TIn* __restrict__ in, void* out, const KfScalars sc) {
  constexpr int NX = sizeof...(TExtra);
  const Epi epi;
  const int64_t plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < g.total; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = e;
    const int64_t ow = g.odiv[2].peel(rest);
    const int64_t oh = g.odiv[1].peel(rest);
    const int64_t od = g.odiv[0].peel(rest);
    const int64_t nc = rest;
    // The operands at the output element: the epilogue's, and the prologue's (constant over the window).
    float x[kf_slots(NX)];
    load_extras<TExtra...>(g, nc, od, oh, ow, x);
    const float pooled = pool_window<Kind, Pro, TIn>(g, in + nc * plane, 1, window(g, 0, od), window(g, 1, oh),
                                                     window(g, 2, ow), x, sc);
    kf_store<TOut>(out, e, epi(pooled, x, sc));
  }
}

// Output rows per thread of the fixed-window kernel: 4 when their window rows overlap ((4 - 1) * SH + KH
// rows for 4 outputs instead of 4 * KH), fewer when that many rows would not fit in registers, 1 when rows
// do not overlap (KH == 1: 1-D pools, or a window one row high) or every tap runs a prologue (its math on
// the shared rows, inlined once per tap, spilled at 4 rows).
__host__ __device__ constexpr int fixed_rows(int kh, int sh, bool prologue) {
  return prologue || kh <= 1 || sh >= kh ? 1 : (3 * sh + kh <= 16) ? 4 : (sh + kh <= 16) ? 2 : 1;
}

// Taps of the window [start, start + k) along a dim of size n clipped to the input, and to the padded extent
// [.., n + pad) (torch's pool_size for count_include_pad).
struct Span {
  int taps, padded;
};
__device__ __forceinline__ Span clip(int start, int k, int n, int pad) {
  const int end = min(start + k, n + pad);
  return {max(min(end, n) - max(start, 0), 0), end - start};
}

template <int Kind, int KD, int KH, int KW, int SH, class Pro, class Epi, typename TOut, typename TIn,
          typename... TExtra>
__global__ void __launch_bounds__(kThreads)
pool_fixed_kernel(const Geom<kf_slots(sizeof...(TExtra))> g, const KfFastDiv hgroups, const int64_t threads,
                  const TIn* __restrict__ in, void* out, const KfScalars sc) {
  constexpr int V = fixed_rows(KH, SH, kHasPrologue<Pro>);
  constexpr int R = (V - 1) * SH + KH;  // input rows of the V outputs' windows (H dilation 1 when V > 1)
  constexpr float kPad = Kind == KF_POOL_MAX ? -INFINITY : 0.f;
  const Pro pro;
  const Epi epi;
  const int ID = int(g.in[0]), IH = int(g.in[1]), IW = int(g.in[2]);
  const int OH = int(g.out[1]);
  const int64_t plane = int64_t(ID) * IH * IW;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < threads; t += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = t;
    const int ow = int(g.odiv[2].peel(rest));  // consecutive threads, consecutive outputs: coalesced taps
    const int oh0 = int(hgroups.peel(rest)) * V;
    const int od = int(g.odiv[0].peel(rest));
    const int64_t nc = rest;
    const TIn* src = in + nc * plane;
    const int d0 = od * g.s[0] - g.p[0], h0 = oh0 * g.s[1] - g.p[1], w0 = ow * g.s[2] - g.p[2];
    // The prologue's operands, constant over every window of this thread (the epilogue's load per output).
    float xp[kf_slots(sizeof...(TExtra))];
    if constexpr (kHasPrologue<Pro>) load_extras<TExtra...>(g, nc, od, oh0, ow, xp);

    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = kPad;
#pragma unroll
    for (int a = 0; a < KD; ++a) {
      const int id = d0 + a * g.dl[0];
      if (id < 0 || id >= ID) continue;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int ih = h0 + r * (V > 1 ? 1 : g.dl[1]);
        if (ih < 0 || ih >= IH) continue;
        const TIn* line = src + (id * IH + ih) * IW;
        float v[KW];
#pragma unroll
        for (int c = 0; c < KW; ++c) {
          const int iw = w0 + c * g.dl[2];
          v[c] = (iw >= 0 && iw < IW) ? pro(kf_to_float<TIn>(line[iw]), xp, sc) : kPad;
        }
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int b = r - j * SH;  // this row's tap index in output j's window
          if (b < 0 || b >= KH) continue;
#pragma unroll
          for (int c = 0; c < KW; ++c) {
            if (Kind == KF_POOL_MAX) {
              if (v[c] > acc[j] || isnan(v[c])) acc[j] = v[c];  // torch's rule: a NaN tap wins and stays
            } else {
              acc[j] += v[c];
            }
          }
        }
      }
    }

    Span sd{1, 1}, sw{1, 1};
    if (Kind == KF_POOL_AVG) {
      sd = clip(d0, KD, ID, g.p[0]);
      sw = clip(w0, KW, IW, g.p[2]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int oh = oh0 + j;
      if (oh >= OH) break;
      float pooled = acc[j];
      if (Kind == KF_POOL_AVG) {
        const Span sh = clip(h0 + j * SH, KH, IH, g.p[1]);
        const int taps = sd.taps * sh.taps * sw.taps;
        const int divisor = g.divisor_override != 0 ? g.divisor_override
                            : g.count_include_pad   ? sd.padded * sh.padded * sw.padded
                                                    : taps;
        pooled = taps == 0 ? 0.f : pooled / float(divisor);
      }
      float x[kf_slots(sizeof...(TExtra))];
      load_extras<TExtra...>(g, nc, od, oh, ow, x);
      kf_store<TOut>(out, ((nc * g.out[0] + od) * OH + oh) * g.out[2] + ow, epi(pooled, x, sc));
    }
  }
}

inline bool dims_valid(const KfPoolParams& p, bool avg) {
  if (p.nd < 1 || p.nd > 3 || p.N < 0 || p.C < 0) return false;
  for (int d = 0; d < p.nd; ++d) {
    if (p.in_size[d] < 0 || p.out_size[d] < 0) return false;
    if (p.adaptive) {
      if (p.out_size[d] > 0 && p.in_size[d] == 0) return false;
      continue;
    }
    if (p.kernel[d] < 1 || p.stride[d] < 1 || p.dilation[d] < 1 || p.pad[d] < 0) return false;
    if (avg && p.dilation[d] != 1) return false;
  }
  return p.divisor_override >= 0;
}

// The launch geometry of p (spatial dims right-aligned into 3), extras' strides spread onto [N, C, D, H, W].
template <int NX>
Geom<kf_slots(NX)> make_geom(const KfPoolParams& p, const KfTensorRef* extra) {
  Geom<kf_slots(NX)> g;
  // Right-align the nd spatial dims into 3 (leading unit dims: one tap, stride 1, no padding).
  const int lead = 3 - p.nd;
  g.total = p.N * p.C;
  for (int d = 0; d < 3; ++d) {
    const int s = d - lead;
    const bool real = s >= 0;
    g.in[d] = real ? p.in_size[s] : 1;
    g.out[d] = real ? p.out_size[s] : 1;
    g.k[d] = real ? p.kernel[s] : 1;
    g.s[d] = real ? p.stride[s] : 1;
    g.p[d] = real ? p.pad[s] : 0;
    g.dl[d] = real ? p.dilation[s] : 1;
    g.odiv[d] = KfFastDiv::make(uint64_t(g.out[d] > 0 ? g.out[d] : 1));
    g.total *= g.out[d];
  }
  g.NC = p.N * p.C;
  g.count_include_pad = p.count_include_pad;
  g.adaptive = p.adaptive;
  g.divisor_override = p.divisor_override;
  g.cdiv = KfFastDiv::make(uint64_t(p.C));
  for (int i = 0; i < kf_slots(NX); ++i) {
    g.x[i] = i < NX && extra != nullptr ? extra[i].data : nullptr;
    // Extras' strides over [N, C, out...] spread onto [N, C, D, H, W].
    for (int d = 0; d < 5; ++d) g.xstride[i][d] = 0;
    if (i < NX && extra != nullptr) {
      g.xstride[i][0] = extra[i].stride[0];
      g.xstride[i][1] = extra[i].stride[1];
      for (int s = 0; s < p.nd; ++s) g.xstride[i][2 + lead + s] = extra[i].stride[2 + s];
    }
  }
  return g;
}

}  // namespace kf_pool

template <int Kind, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
cudaError_t kf_launch_pool(const KfPoolParams& p, const void* in, void* out, const KfTensorRef* extra,
                           const KfScalars& sc, cudaStream_t stream) {
  constexpr int NX = sizeof...(TExtra);
  static_assert(Kind == KF_POOL_MAX || Kind == KF_POOL_AVG, "kf_launch_pool: Kind is KF_POOL_MAX or KF_POOL_AVG");
  static_assert(Epi::kIn == NX, "kf_launch_pool: sizeof...(TExtra) == Epi::kIn");
  static_assert(!kf_pool::kHasPrologue<Pro> || Pro::kIn == NX, "kf_launch_pool: sizeof...(TExtra) == Pro::kIn");
  if (!kf_pool::dims_valid(p, Kind == KF_POOL_AVG)) return cudaErrorInvalidValue;
  const kf_pool::Geom<kf_slots(NX)> g = kf_pool::make_geom<NX>(p, extra);
  if (g.total == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr || (NX > 0 && extra == nullptr)) return cudaErrorInvalidValue;
  int64_t blocks = (g.total + kf_pool::kThreads - 1) / kf_pool::kThreads;
  if (blocks > (int64_t(1) << 30)) blocks = int64_t(1) << 30;
  kf_pool::pool_kernel<Kind, Pro, Epi, TOut, TIn, TExtra...>
      <<<unsigned(blocks), kf_pool::kThreads, 0, stream>>>(g, static_cast<const TIn*>(in), out, sc);
  return cudaGetLastError();
}

// The fixed-window kernel when p is the window it was instantiated for (and its plane offsets fit 32 bits),
// the generic one otherwise.
template <int Kind, int KD, int KH, int KW, int SH, class Pro, class Epi, typename TOut, typename TIn,
          typename... TExtra>
cudaError_t kf_launch_pool_fixed(const KfPoolParams& p, const void* in, void* out, const KfTensorRef* extra,
                                 const KfScalars& sc, cudaStream_t stream) {
  constexpr int NX = sizeof...(TExtra);
  constexpr int V = kf_pool::fixed_rows(KH, SH, kf_pool::kHasPrologue<Pro>);
  static_assert(KD >= 1 && KH >= 1 && KW >= 1 && SH >= 1, "kf_launch_pool_fixed: a window of at least one tap");
  static_assert(Epi::kIn == NX, "kf_launch_pool_fixed: sizeof...(TExtra) == Epi::kIn");
  static_assert(!kf_pool::kHasPrologue<Pro> || Pro::kIn == NX, "kf_launch_pool_fixed: sizeof...(TExtra) == Pro::kIn");
  if (!kf_pool::dims_valid(p, Kind == KF_POOL_AVG)) return cudaErrorInvalidValue;
  const kf_pool::Geom<kf_slots(NX)> g = kf_pool::make_geom<NX>(p, extra);
  const int64_t plane = g.in[0] * g.in[1] * g.in[2];
  const bool fits = !g.adaptive && g.k[0] == KD && g.k[1] == KH && g.k[2] == KW && g.s[1] == SH &&
                    (V == 1 || g.dl[1] == 1) && plane < (int64_t(1) << 31) && g.out[1] < (int64_t(1) << 30);
  if (!fits) return kf_launch_pool<Kind, Pro, Epi, TOut, TIn, TExtra...>(p, in, out, extra, sc, stream);
  if (g.total == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr || (NX > 0 && extra == nullptr)) return cudaErrorInvalidValue;
  const int64_t groups = (g.out[1] + V - 1) / V;
  const int64_t threads = g.NC * g.out[0] * groups * g.out[2];
  int64_t blocks = (threads + kf_pool::kThreads - 1) / kf_pool::kThreads;
  if (blocks > (int64_t(1) << 30)) blocks = int64_t(1) << 30;
  kf_pool::pool_fixed_kernel<Kind, KD, KH, KW, SH, Pro, Epi, TOut, TIn, TExtra...>
      <<<unsigned(blocks), kf_pool::kThreads, 0, stream>>>(g, KfFastDiv::make(uint64_t(groups)), threads,
                                                           static_cast<const TIn*>(in), out, sc);
  return cudaGetLastError();
}
