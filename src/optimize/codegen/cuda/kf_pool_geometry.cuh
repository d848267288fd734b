// Pooling geometry from the flat int list the Python side builds (see codegen/region.ts poolGeometry):
// [kind, nd, adaptive, kernel[nd], stride[nd], pad[nd], dilation[nd], ceil_mode, count_include_pad,
//  divisor_override, adaptive_out[nd]] and the input's N, C, spatial sizes.
#pragma once
#include "kf_pool.cuh"

inline cudaError_t kf_pool_params_from(const int64_t* geo, int ngeo, const int64_t* in_shape, int in_rank,
                                       KfPoolParams* p) {
  if (ngeo < 3) return cudaErrorInvalidValue;
  const int nd = static_cast<int>(geo[1]);
  if (nd < 1 || nd > 3 || in_rank != nd + 2 || ngeo != 3 + 4 * nd + 3 + nd) return cudaErrorInvalidValue;
  *p = KfPoolParams{};
  p->nd = nd;
  p->N = in_shape[0];
  p->C = in_shape[1];
  p->adaptive = geo[2] != 0;
  const int64_t* kernel = geo + 3;
  const int64_t* stride = kernel + nd;
  const int64_t* pad = stride + nd;
  const int64_t* dil = pad + nd;
  const int64_t ceil_mode = dil[nd];
  p->count_include_pad = dil[nd + 1] != 0;
  p->divisor_override = static_cast<int>(dil[nd + 2]);
  const int64_t* adaptive_out = dil + nd + 3;
  for (int d = 0; d < nd; ++d) {
    const int64_t in = in_shape[2 + d];
    p->in_size[d] = in;
    p->kernel[d] = static_cast<int>(kernel[d]);
    p->stride[d] = static_cast<int>(stride[d]);
    p->pad[d] = static_cast<int>(pad[d]);
    p->dilation[d] = static_cast<int>(dil[d]);
    if (p->adaptive) {
      p->out_size[d] = adaptive_out[d];
      continue;
    }
    // PyTorch's pooling_output_shape: ceil mode may add a window, but never one starting in the padding.
    const int64_t span = in + 2 * pad[d] - dil[d] * (kernel[d] - 1) - 1 + (ceil_mode ? stride[d] - 1 : 0);
    int64_t out = span / stride[d] + 1;
    if (ceil_mode && (out - 1) * stride[d] >= in + pad[d]) --out;
    p->out_size[d] = out;
  }
  return cudaSuccess;
}
