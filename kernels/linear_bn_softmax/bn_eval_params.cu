// Eval mode: the per-column affine of the row pass comes from the running statistics.
//   z = (x W^T + b - running_mean) * gamma / sqrt(running_var + eps) * scale + beta * scale
// so shift = running_mean - b (the GEMM output carries no bias), mult and add as in training.
// Computed per call from the live buffers and parameters: nothing is folded ahead of time.
#include "common.cuh"
#include "bn_params.cuh"

namespace lbs {

__global__ void __launch_bounds__(kFinalizeThreads)
bn_eval_params_kernel(int64_t cols, BatchNormParams bn, ColumnAffineOut out) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kFinalizeThreads + threadIdx.x;
  if (col >= cols) return;
  const double bias = bn.bias != nullptr ? static_cast<double>(bn.bias[col]) : 0.0;
  const double inv_std = 1.0 / sqrt(static_cast<double>(bn.running_var[col]) + bn.eps);
  const double gamma = bn.gamma != nullptr ? static_cast<double>(bn.gamma[col]) : 1.0;
  const double beta = bn.beta != nullptr ? static_cast<double>(bn.beta[col]) : 0.0;
  const double scale = static_cast<double>(bn.scale[col * bn.scale_stride]);
  out.shift[col] = static_cast<float>(static_cast<double>(bn.running_mean[col]) - bias);
  out.mult[col] = static_cast<float>(scale * gamma * inv_std);
  out.add[col] = static_cast<float>(scale * beta);
}

}  // namespace lbs
