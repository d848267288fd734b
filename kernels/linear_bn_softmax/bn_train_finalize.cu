// Per-column batch statistics, stage 2 (training mode): merge the row-tile partials of
// column_stats.cu, update the running statistics exactly as torch.nn.BatchNorm1d does, and emit the
// per-column affine that the row pass applies:  z = (y - shift) * mult + add, where
//   shift = batch mean of x W^T (the Linear bias cancels in y - mean),
//   mult  = scale * gamma / sqrt(biased_var + eps),   add = scale * beta.
// One thread per column (small CTAs, so the N columns spread over many SMs).
#include "common.cuh"
#include "bn_params.cuh"

namespace lbs {

__global__ void __launch_bounds__(kFinalizeThreads)
bn_train_finalize_kernel(const float* __restrict__ tile_mean, const float* __restrict__ tile_m2,
                         int64_t tiles, int64_t rows_total, int64_t cols, BatchNormParams bn,
                         ColumnAffineOut out) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFinalizeThreads + threadIdx.x;
  if (col >= cols) return;

  // All tiles merged at once (Chan's pairwise update unrolled over the tiles):
  //   mean = sum_t n_t mean_t / n,   M2 = sum_t [M2_t + n_t (mean_t - mean)^2].
  // Two passes of independent loads instead of a serial chain with a division per tile; double
  // accumulation in a fixed tile order, so the result is deterministic and exact to ~1e-16.
  const double n = static_cast<double>(rows_total);
  double weighted_sum = 0.0;
#pragma unroll 8
  for (int64_t t = 0; t < tiles; ++t) {
    const double n_t = static_cast<double>(rows_in_tile(rows_total, t * kStatsRowsPerTile));
    weighted_sum += n_t * static_cast<double>(tile_mean[t * cols + col]);
  }
  const double mean = weighted_sum / n;
  double m2 = 0.0;
#pragma unroll 8
  for (int64_t t = 0; t < tiles; ++t) {
    const double n_t = static_cast<double>(rows_in_tile(rows_total, t * kStatsRowsPerTile));
    const double d = static_cast<double>(tile_mean[t * cols + col]) - mean;
    m2 += static_cast<double>(tile_m2[t * cols + col]) + n_t * d * d;
  }
  const double var_biased = m2 / n;
  const double inv_std = 1.0 / sqrt(var_biased + bn.eps);

  if (bn.running_mean != nullptr) {
    const double factor = bn.cumulative_average
                              ? 1.0 / static_cast<double>(*bn.num_batches_tracked)
                              : bn.momentum;
    const double bias = bn.bias != nullptr ? static_cast<double>(bn.bias[col]) : 0.0;
    const double var_unbiased = m2 / (n - 1.0);  // host guarantees n >= 2 in training
    bn.running_mean[col] =
        static_cast<float>((1.0 - factor) * static_cast<double>(bn.running_mean[col]) + factor * (mean + bias));
    bn.running_var[col] =
        static_cast<float>((1.0 - factor) * static_cast<double>(bn.running_var[col]) + factor * var_unbiased);
  }

  const double gamma = bn.gamma != nullptr ? static_cast<double>(bn.gamma[col]) : 1.0;
  const double beta = bn.beta != nullptr ? static_cast<double>(bn.beta[col]) : 0.0;
  const double scale = static_cast<double>(bn.scale[col * bn.scale_stride]);
  out.shift[col] = static_cast<float>(mean);
  out.mult[col] = static_cast<float>(scale * gamma * inv_std);
  out.add[col] = static_cast<float>(scale * beta);
}

}  // namespace lbs
