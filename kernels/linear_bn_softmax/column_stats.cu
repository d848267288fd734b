// Per-column batch statistics of Y (M x N, row-major), stage 1: partials over row tiles.
// CTA (blockIdx.x, blockIdx.y) covers row tile blockIdx.x (kStatsRowsPerTile rows) of kStatsThreads
// columns. Each thread reads its column in blocks of kStatsRowsPerBlock values held in registers (all
// loads of a block in flight at once; a warp reads 128 contiguous bytes per row), takes each block's
// exact two-pass mean and M2 = sum((y - mean)^2), merges the blocks with Chan's formula and writes the
// tile's mean and M2 (its count is implied by the tile index). bn_train_finalize.cu merges the tiles
// in a fixed order, so the statistics are deterministic and never use sum / sum-of-squares.
//
// Training calls also bump BatchNorm's num_batches_tracked here (one thread), as nn.BatchNorm1d does
// before it reads the counter for momentum=None; the finalize kernel, next on the stream, reads it.
#include "common.cuh"

namespace lbs {

__global__ void __launch_bounds__(kStatsThreads)
column_stats_partial_kernel(const float* __restrict__ y, int64_t rows_total, int64_t cols,
                            float* __restrict__ tile_mean, float* __restrict__ tile_m2,
                            int64_t* __restrict__ num_batches_tracked) {
  if (num_batches_tracked != nullptr && blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) {
    *num_batches_tracked += 1;
  }
  const int64_t col = static_cast<int64_t>(blockIdx.y) * kStatsThreads + threadIdx.x;
  if (col >= cols) return;
  const int64_t tile_row0 = static_cast<int64_t>(blockIdx.x) * kStatsRowsPerTile;

  float n = 0.0f, mean = 0.0f, m2 = 0.0f;
#pragma unroll 1
  for (int b = 0; b < kStatsBlocksPerTile; ++b) {
    const int64_t row0 = tile_row0 + b * kStatsRowsPerBlock;
    if (row0 >= rows_total) break;
    const int rows = static_cast<int>(rows_total - row0 < kStatsRowsPerBlock ? rows_total - row0 : kStatsRowsPerBlock);

    float v[kStatsRowsPerBlock];
    const float* p = y + row0 * cols + col;
#pragma unroll
    for (int r = 0; r < kStatsRowsPerBlock; ++r) v[r] = (r < rows) ? p[r * cols] : 0.0f;

    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kStatsRowsPerBlock; ++r) sum += v[r];  // padded rows hold 0
    const float nb = static_cast<float>(rows);
    const float mean_b = sum / nb;
    float m2_b = 0.0f;
#pragma unroll
    for (int r = 0; r < kStatsRowsPerBlock; ++r) {
      const float d = (r < rows) ? v[r] - mean_b : 0.0f;
      m2_b = fmaf(d, d, m2_b);
    }

    // Chan: (n, mean, m2) + (nb, mean_b, m2_b)
    const float n_ab = n + nb;
    const float delta = mean_b - mean;
    mean = fmaf(delta, nb / n_ab, mean);
    m2 += m2_b + delta * delta * (n * nb / n_ab);
    n = n_ab;
  }
  const int64_t out = static_cast<int64_t>(blockIdx.x) * cols + col;
  tile_mean[out] = mean;
  tile_m2[out] = m2;
}

}  // namespace lbs
