// kf_pool_cl.cuh — kf_pool.cuh's pooling (same Pro / Epi contract, windows and torch semantics) of a
// channels-last input: the logical [N, C, (D,) (H,) W] stored as [N, (D,) (H,) W, C] (torch's channels_last /
// channels_last_3d), as a convolution run channels-last writes it. The output is the reference's contiguous
// [N, C, out...], so a pool after such a conv reads its output once and no pass converts the layout.
//
//   cudaError_t kf_launch_pool_cl<Kind, Pro, Epi, TOut, TIn, TExtra...>(p, in, out, extra, sc, stream)
//     the arguments of kf_launch_pool; `in` channels-last (its C stride 1, W stride C, ...).
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

template <int Kind, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
__global__ void __launch_bounds__(kTile * kRows)
pool_cl_kernel(const kf_pool::Geom<kf_slots(sizeof...(TExtra))> g, const int64_t C, const int64_t tiles,
               const KfFastDiv cTiles, const KfFastDiv wTiles, const TIn* __restrict__ in, void* out,
               const KfScalars sc) {
  constexpr int NX = sizeof...(TExtra);
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
#pragma unroll 1  // each output's window loops are long; four inlined copies spilled
    for (int j = 0; j < kTile / kRows; ++j) {
      const int64_t ow = w0 + ty + kRows * j;
      float v = 0.f;
      if (c < C && ow < g.out[2]) {
        float x[kf_slots(NX)];
        kf_pool::load_extras<TExtra...>(g, n * C + c, od, oh, ow, x);
        const float pooled = kf_pool::pool_window<Kind, Pro, TIn>(g, in + n * plane * C + c, C, wd, wh,
                                                                  kf_pool::window(g, 2, ow), x, sc);
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

}  // namespace kf_pool_cl

template <int Kind, class Pro, class Epi, typename TOut, typename TIn, typename... TExtra>
cudaError_t kf_launch_pool_cl(const KfPoolParams& p, const void* in, void* out, const KfTensorRef* extra,
                              const KfScalars& sc, cudaStream_t stream) {
  constexpr int NX = sizeof...(TExtra);
  static_assert(Kind == KF_POOL_MAX || Kind == KF_POOL_AVG, "kf_launch_pool_cl: Kind is KF_POOL_MAX or KF_POOL_AVG");
  static_assert(Epi::kIn == NX, "kf_launch_pool_cl: sizeof...(TExtra) == Epi::kIn");
  static_assert(!kf_pool::kHasPrologue<Pro> || Pro::kIn == NX, "kf_launch_pool_cl: sizeof...(TExtra) == Pro::kIn");
  if (!kf_pool::dims_valid(p, Kind == KF_POOL_AVG)) return cudaErrorInvalidValue;
  const kf_pool::Geom<kf_slots(NX)> g = kf_pool::make_geom<NX>(p, extra);
  if (g.total == 0) return cudaSuccess;
  if (in == nullptr || out == nullptr || (NX > 0 && extra == nullptr)) return cudaErrorInvalidValue;
  const int64_t cTiles = (p.C + kf_pool_cl::kTile - 1) / kf_pool_cl::kTile;
  const int64_t wTiles = (g.out[2] + kf_pool_cl::kTile - 1) / kf_pool_cl::kTile;
  const int64_t tiles = p.N * g.out[0] * g.out[1] * cTiles * wTiles;
  const int64_t blocks = tiles < (int64_t(1) << 30) ? tiles : (int64_t(1) << 30);
  kf_pool_cl::pool_cl_kernel<Kind, Pro, Epi, TOut, TIn, TExtra...>
      <<<unsigned(blocks), dim3(kf_pool_cl::kTile, kf_pool_cl::kRows), 0, stream>>>(
          g, p.C, tiles, KfFastDiv::make(uint64_t(cTiles)), KfFastDiv::make(uint64_t(wTiles)),
          static_cast<const TIn*>(in), out, sc);
  return cudaGetLastError();
}
