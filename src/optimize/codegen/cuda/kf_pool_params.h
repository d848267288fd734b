// Plain host/device type of a pooling launch (kf_pool.cuh): kept out of the .cuh so the torch-side .cpp unit,
// which builds it from module attributes, can include it without CUDA device code.
#pragma once
#include <stdint.h>

// nd spatial dims, each array outermost first (nd = 2: [H, W]); entries past nd are ignored.
struct KfPoolParams {
  int nd;
  int64_t N, C;
  int64_t in_size[3];
  int64_t out_size[3];  // the caller's, ceil_mode included
  int kernel[3];
  int stride[3];
  int pad[3];
  int dilation[3];
  bool count_include_pad;
  int divisor_override;  // 0 = none
  bool adaptive;         // adaptive windows: start = floor(i * In / Out), end = ceil((i + 1) * In / Out)
};

enum KfPoolKind { KF_POOL_MAX = 0, KF_POOL_AVG = 1 };
