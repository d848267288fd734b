// Per-column batch statistics of Y (M x N, row-major), stage 1: partials over row tiles.
// CTA (blockIdx.x, blockIdx.y) covers the row tile blockIdx.x of kStatsThreads columns; each thread
// loads its column's kStatsRowsPerTile values into registers (all loads in flight at once, a warp reads
// 128 contiguous bytes per row) and writes the tile's count-implied mean and M2 = sum((y - mean)^2),
// an exact two-pass over registers. bn_train_finalize.cu merges the tiles in a fixed order (Chan), so
// the statistics are deterministic run to run and never use the weak sum / sum-of-squares formula.
#include "common.cuh"

namespace lbs {

__global__ void __launch_bounds__(kStatsThreads)
column_stats_partial_kernel(const float* __restrict__ y, int64_t rows_total, int64_t cols,
                            float* __restrict__ tile_mean, float* __restrict__ tile_m2) {
  const int64_t col = static_cast<int64_t>(blockIdx.y) * kStatsThreads + threadIdx.x;
  if (col >= cols) return;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kStatsRowsPerTile;
  const int rows = static_cast<int>(rows_in_tile(rows_total, row0));

  float v[kStatsRowsPerTile];
  const float* p = y + row0 * cols + col;
#pragma unroll
  for (int r = 0; r < kStatsRowsPerTile; ++r) v[r] = (r < rows) ? p[r * cols] : 0.0f;

  float sum = 0.0f;
#pragma unroll
  for (int r = 0; r < kStatsRowsPerTile; ++r) sum += v[r];  // padded rows hold 0
  const float mean = sum / static_cast<float>(rows);
  float m2 = 0.0f;
#pragma unroll
  for (int r = 0; r < kStatsRowsPerTile; ++r) {
    const float d = (r < rows) ? v[r] - mean : 0.0f;
    m2 = fmaf(d, d, m2);
  }
  const int64_t out = static_cast<int64_t>(blockIdx.x) * cols + col;
  tile_mean[out] = mean;
  tile_m2[out] = m2;
}

}  // namespace lbs
