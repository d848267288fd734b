// kf_pool_cl.cuh — kf_pool.cuh's pooling (same Pro / Epi contract, windows and torch semantics) of a
// channels-last input: the logical [N, C, (D,) (H,) W] stored as [N, (D,) (H,) W, C] (torch's channels_last /
// channels_last_3d), as a convolution run channels-last writes it. The output is the reference's contiguous
// [N, C, out...], so a pool after such a conv reads its output once and no pass converts the layout.
//
//   cudaError_t kf_launch_pool_cl<Kind, KD, KH, KW, Pro, Epi, TOut, TIn, TExtra...>(p, in, out, extra, sc, stream)
//     the arguments of kf_launch_pool; `in` channels-last (its C stride 1, W stride C, ...). KD, KH, KW: the
//     window the kernel is unrolled for (1, KH, KW for a 2-D pool), used when p's window is that one and not
//     adaptive; 0, 0, 0 (or another window) takes the kernel that loops over any window.
//
// A block takes a tile of 32 channels x 32 outputs along W of one output row (n, od, oh). Thread (tx, ty)
// pools channel c0 + tx at outputs ow0 + ty + 8j (j < 4): a warp's tap loads read 32 consecutive channels of
// one input pixel (one 128-byte line in fp32). The tile goes through shared memory transposed, so a warp's
// stores run along W.
#pragma once
#include "kf_pool.cuh"

namespace kf_pool_cl {

constexpr int kTile = 32;  // channels and W outputs of a block's tile
constexpr int kRows = 8;   // threads along W; each takes kTile / kRows outputs

// The pooled value of the KD x KH x KW window at (d0, h0, w0) (its first tap, padding included) of the plane at
// `src`, element (id, ih, iw) at ((id * H + ih) * W + iw) * C: every tap's load unrolled, so a thread has all
// of them in flight at once, where pool_window's loops over a window of any size issue them one at a time.
template <int Kind, int KD, int KH, int KW, class Pro, typename TIn, int NX>
__device__ __forceinline__ float pool_window_fixed(const kf_pool::Geom<NX>& g, const TIn* __restrict__ src,
                                                   int64_t C, int d0, int h0, int w0, const float (&x)[NX],
                                                   const KfScalars& sc) {
  const Pro pro;
  const int ID = int(g.in[0]), IH = int(g.in[1]), IW = int(g.in[2]);
  float acc = Kind == KF_POOL_MAX ? -INFINITY : 0.f;
#pragma unroll
  for (int a = 0; a < KD; ++a) {
    const int id = d0 + a * g.dl[0];
    if (id < 0 || id >= ID) continue;
#pragma unroll
    for (int b = 0; b < KH; ++b) {
      const int ih = h0 + b * g.dl[1];
      if (ih < 0 || ih >= IH) continue;
      const TIn* line = src + (int64_t(id) * IH + ih) * IW * C;
#pragma unroll
      for (int c = 0; c < KW; ++c) {
        const int iw = w0 + c * g.dl[2];
        if (iw < 0 || iw >= IW) continue;
        const float v = pro(kf_to_float<TIn>(line[iw * C]), x, sc);
        if (Kind == KF_POOL_MAX) {
          if (v > acc || isnan(v)) acc = v;  // torch's rule: a NaN tap wins and stays
        } else {
          acc += v;
        }
      }
    }
  }
  if (Kind == KF_POOL_MAX) return acc;
  const kf_pool::Span sd = kf_pool::clip(d0, KD, ID, g.p[0]), sh = kf_pool::clip(h0, KH, IH, g.p[1]),
                      sw = kf_pool::clip(w0, KW, IW, g.p[2]);
  const int taps = sd.taps * sh.taps * sw.taps;
  const int divisor = g.divisor_override != 0 ? g.divisor_override
                      : g.count_include_pad   ? sd.padded * sh.padded * sw.padded
                                              : taps;
  return taps == 0 ? 0.f : acc / float(divisor);
}

// The any-window instantiation (KD == 0), which every launcher instantiates as its fallback, takes 3 blocks per SM
// as its register target (85): with the thread count alone ptxas spilled 12-32 bytes there (a 3-D window, a dilated
// one), and at 4 (64) an avg pool with three prologue operands still spilled 20. The unrolled windows keep the
// thread count alone (0: no bound; 1 is a bound, and gave a 3x3x3 window 72 registers where it takes 32).
template <int Kind, int KD, int KH, int KW, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
__global__ void __launch_bounds__(kTile * kRows, KD > 0 ? 0 : 3)
pool_cl_kernel(const kf_pool::Geom<kf_slots(sizeof...(TExtra))> g, const int64_t C, const int64_t tiles,
               const KfFastDiv cTiles, const KfFastDiv wTiles, const TIn* __restrict__ in, void* out,
               const KfScalars sc) {
  constexpr int NX = sizeof...(TExtra);
  constexpr bool kFixed = KD > 0;
  // A window of any size loops per tap: four inlined copies of those loops spilled. Small fixed windows unroll
  // the four outputs too, their taps' loads all in flight together.
  constexpr int kOutputsUnrolled = kFixed && KD * KH * KW <= 16 ? kTile / kRows : 1;
  __shared__ float tile[kTile][kTile + 1];  // [W output][channel], padded against bank conflicts
  const Epi epi;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t plane = g.in[0] * g.in[1] * g.in[2];
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t rest = t;
    const int64_t w0 = wTiles.peel(rest) * kTile;
    const int64_t c0 = cTiles.peel(rest) * kTile;
    const int64_t oh = g.odiv[1].peel(rest);
    const int64_t od = g.odiv[0].peel(rest);
    const int64_t n = rest;
    const int64_t c = c0 + tx;
    const kf_pool::Window wd = kf_pool::window(g, 0, od), wh = kf_pool::window(g, 1, oh);
#pragma unroll(kOutputsUnrolled)
    for (int j = 0; j < kTile / kRows; ++j) {
      const int64_t ow = w0 + ty + kRows * j;
      float v = 0.f;
      if (c < C && ow < g.out[2]) {
        float x[kf_slots(NX)];
        kf_pool::load_extras<TExtra...>(g, n * C + c, od, oh, ow, x);
        const TIn* src = in + n * plane * C + c;
        float pooled;
        if constexpr (kFixed)
          pooled = pool_window_fixed<Kind, KD, KH, KW, Pro, TIn>(g, src, C, int(wd.start), int(wh.start),
                                                                 int(ow * g.s[2] - g.p[2]), x, sc);
        else
          pooled = kf_pool::pool_window<Kind, Pro, TIn>(g, src, C, wd, wh, kf_pool::window(g, 2, ow), x, sc);
        v = epi(pooled, x, sc);
      }
      tile[ty + kRows * j][tx] = v;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile / kRows; ++j) {
      const int64_t cc = c0 + ty + kRows * j, ow = w0 + tx;
      if (cc < C && ow < g.out[2])
        kf_store<TOut>(out, (((n * C + cc) * g.out[0] + od) * g.out[1] + oh) * g.out[2] + ow, tile[tx][ty + kRows * j]);
    }
    __syncthreads();  // the tile is rewritten by the block's next one
  }
}

// The unrolled window's kernel for the common case: C a multiple of kVec and the input aligned to kVec elements.
// A thread pools kVec consecutive channels of one output in one vector load per tap, so the tap's bounds and
// address (32-bit, within one sample) are paid once per kVec elements: the scalar kernel above spent most of
// its issue slots on 64-bit tap addressing, not on its loads (ncu: SM 75%, DRAM 22% on a 2x2 avg pool).
// A block's tile: kVecLanes x kVec channels by kVecRows outputs along W, one output per thread.
constexpr int kVec = 4;
constexpr int kVecLanes = 8;
constexpr int kVecRows = 32;
constexpr int kVecTileC = kVecLanes * kVec;

template <int Kind, int KD, int KH, int KW, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
__global__ void __launch_bounds__(kVecLanes * kVecRows)
pool_cl_vec_kernel(const kf_pool::Geom<kf_slots(sizeof...(TExtra))> g, const int64_t C, const int64_t tiles,
                   const KfFastDiv cTiles, const KfFastDiv wTiles, const TIn* __restrict__ in, void* out,
                   const KfScalars sc) {
  constexpr int NX = sizeof...(TExtra);
  __shared__ float tile[kVecRows][kVecTileC + 1];  // [W output][channel], padded against bank conflicts
  const Pro pro;
  const Epi epi;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int ID = int(g.in[0]), IH = int(g.in[1]), IW = int(g.in[2]);
  const int Ci = int(C);  // the launcher checks that a sample (plane x C) is indexed by an int
  const int64_t sample = g.in[0] * g.in[1] * g.in[2] * C;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t rest = t;
    const int64_t w0 = wTiles.peel(rest) * kVecRows;
    const int64_t c0 = cTiles.peel(rest) * kVecTileC;
    const int oh = int(g.odiv[1].peel(rest));
    const int od = int(g.odiv[0].peel(rest));
    const int64_t n = rest;
    const int c = int(c0) + tx * kVec;
    const int ow = int(w0) + ty;
    float v[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = 0.f;
    if (c < Ci && ow < int(g.out[2])) {
      float x[kVec][kf_slots(NX)];
      kf_pool::load_extras_channels<kVec, TExtra...>(g, n, c, od, oh, ow, x);
      const TIn* src = in + n * sample + c;
      const int d0 = od * g.s[0] - g.p[0], h0 = oh * g.s[1] - g.p[1], w0i = ow * g.s[2] - g.p[2];
      float acc[kVec];
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] = Kind == KF_POOL_MAX ? -INFINITY : 0.f;
#pragma unroll
      for (int a = 0; a < KD; ++a) {
        const int id = d0 + a * g.dl[0];
        if (id < 0 || id >= ID) continue;
#pragma unroll
        for (int b = 0; b < KH; ++b) {
          const int ih = h0 + b * g.dl[1];
          if (ih < 0 || ih >= IH) continue;
#pragma unroll
          for (int e = 0; e < KW; ++e) {
            const int iw = w0i + e * g.dl[2];
            if (iw < 0 || iw >= IW) continue;
            float tap[kVec];
            kf_load_vec<TIn, kVec>(src, ((id * IH + ih) * IW + iw) * Ci, false, tap);
#pragma unroll
            for (int k = 0; k < kVec; ++k) {
              const float p = pro(tap[k], x[k], sc);
              if (Kind == KF_POOL_MAX) {
                if (p > acc[k] || isnan(p)) acc[k] = p;  // torch's rule: a NaN tap wins and stays
              } else {
                acc[k] += p;
              }
            }
          }
        }
      }
      int divisor = 1;
      bool empty = false;
      if (Kind == KF_POOL_AVG) {
        const kf_pool::Span sd = kf_pool::clip(d0, KD, ID, g.p[0]), sh = kf_pool::clip(h0, KH, IH, g.p[1]),
                            sw = kf_pool::clip(w0i, KW, IW, g.p[2]);
        const int taps = sd.taps * sh.taps * sw.taps;
        divisor = g.divisor_override != 0 ? g.divisor_override
                  : g.count_include_pad   ? sd.padded * sh.padded * sw.padded
                                          : taps;
        empty = taps == 0;
      }
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        // torch divides (no reciprocal), as the scalar kernels do
        const float pooled = Kind == KF_POOL_AVG ? (empty ? 0.f : acc[k] / float(divisor)) : acc[k];
        v[k] = epi(pooled, x[k], sc);
      }
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) tile[ty][tx * kVec + k] = v[k];
    __syncthreads();
    // A warp stores kVecRows consecutive W outputs of one channel.
    const int lane = (ty * kVecLanes + tx) & 31, warp = (ty * kVecLanes + tx) >> 5;
    constexpr int kWarps = kVecLanes * kVecRows / 32;
#pragma unroll
    for (int j = 0; j < kVecTileC / kWarps; ++j) {
      const int64_t cc = c0 + warp + kWarps * j, o = w0 + lane;
      if (cc < C && o < g.out[2])
        kf_store<TOut>(out, (((n * C + cc) * g.out[0] + od) * g.out[1] + oh) * g.out[2] + o, tile[lane][warp + kWarps * j]);
    }
    __syncthreads();  // the tile is rewritten by the block's next one
  }
}

}  // namespace kf_pool_cl

template <int Kind, int KD, int KH, int KW, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
cudaError_t kf_launch_pool_cl(const KfPoolParams& p, const void* in, void* out, const KfTensorRef* extra,
                              const KfScalars& sc, cudaStream_t stream) {
  constexpr int NX = sizeof...(TExtra);
  static_assert(Kind == KF_POOL_MAX || Kind == KF_POOL_AVG, "kf_launch_pool_cl: Kind is KF_POOL_MAX or KF_POOL_AVG");
  static_assert(KD >= 0 && KH >= 0 && KW >= 0 && (KD > 0) == (KH > 0) && (KD > 0) == (KW > 0),
                "kf_launch_pool_cl: a window of at least one tap per dim, or 0, 0, 0 for any window");
  static_assert(Epi::kIn == NX, "kf_launch_pool_cl: sizeof...(TExtra) == Epi::kIn");
  static_assert(!kf_pool::kHasPrologue<Pro> || Pro::kIn == NX, "kf_launch_pool_cl: sizeof...(TExtra) == Pro::kIn");
  if (!kf_pool::dims_valid(p, Kind == KF_POOL_AVG)) return cudaErrorInvalidValue;
  const kf_pool::Geom<kf_slots(NX)> g = kf_pool::make_geom<NX>(p, extra);
  if (g.total == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr || (NX > 0 && extra == nullptr)) return cudaErrorInvalidValue;
  // The unrolled window's coordinates are ints (pool_fixed_kernel's bound).
  const bool fixed = KD > 0 && !g.adaptive && g.k[0] == KD && g.k[1] == KH && g.k[2] == KW &&
                     g.in[0] * g.in[1] * g.in[2] < (int64_t(1) << 31) &&
                     g.out[0] * g.out[1] * g.out[2] < (int64_t(1) << 31);
  const int64_t cTiles = (p.C + kf_pool_cl::kTile - 1) / kf_pool_cl::kTile;
  const int64_t wTiles = (g.out[2] + kf_pool_cl::kTile - 1) / kf_pool_cl::kTile;
  const int64_t tiles = p.N * g.out[0] * g.out[1] * cTiles * wTiles;
  const int64_t blocks = tiles < (int64_t(1) << 30) ? tiles : (int64_t(1) << 30);
  const dim3 grid{unsigned(blocks)}, block{kf_pool_cl::kTile, kf_pool_cl::kRows};
  const KfFastDiv cDiv = KfFastDiv::make(uint64_t(cTiles)), wDiv = KfFastDiv::make(uint64_t(wTiles));
  if constexpr (KD > 0) {
    // The vector kernel's taps are kVec-aligned: C a multiple of kVec, the input aligned to kVec elements.
    const bool vec = fixed && p.C % kf_pool_cl::kVec == 0 &&
                     reinterpret_cast<uintptr_t>(in) % (kf_pool_cl::kVec * sizeof(TIn)) == 0 &&
                     g.in[0] * g.in[1] * g.in[2] * p.C < (int64_t(1) << 31);
    if (vec) {
      const int64_t vcTiles = (p.C + kf_pool_cl::kVecTileC - 1) / kf_pool_cl::kVecTileC;
      const int64_t vwTiles = (g.out[2] + kf_pool_cl::kVecRows - 1) / kf_pool_cl::kVecRows;
      const int64_t vtiles = p.N * g.out[0] * g.out[1] * vcTiles * vwTiles;
      const dim3 vgrid{unsigned(vtiles < (int64_t(1) << 30) ? vtiles : (int64_t(1) << 30))};
      kf_pool_cl::pool_cl_vec_kernel<Kind, KD, KH, KW, Pro, Epi, TOut, TIn, TExtra...>
          <<<vgrid, dim3{kf_pool_cl::kVecLanes, kf_pool_cl::kVecRows}, 0, stream>>>(
              g, p.C, vtiles, KfFastDiv::make(uint64_t(vcTiles)), KfFastDiv::make(uint64_t(vwTiles)),
              static_cast<const TIn*>(in), out, sc);
      return cudaGetLastError();
    }
    if (fixed) {
      kf_pool_cl::pool_cl_kernel<Kind, KD, KH, KW, Pro, Epi, TOut, TIn, TExtra...><<<grid, block, 0, stream>>>(
          g, p.C, tiles, cDiv, wDiv, static_cast<const TIn*>(in), out, sc);
      return cudaGetLastError();
    }
  }
  kf_pool_cl::pool_cl_kernel<Kind, 0, 0, 0, Pro, Epi, TOut, TIn, TExtra...><<<grid, block, 0, stream>>>(
      g, p.C, tiles, cDiv, wDiv, static_cast<const TIn*>(in), out, sc);
  return cudaGetLastError();
}
