// Arguments shared by the two kernels that produce the row pass's per-column affine.
#ifndef KFORGE_LINEAR_BN_SOFTMAX_BN_PARAMS_CUH
#define KFORGE_LINEAR_BN_SOFTMAX_BN_PARAMS_CUH

#include <cstdint>

namespace lbs {

struct ColumnAffineOut {
  float* shift;
  float* mult;
  float* add;
};

struct BatchNormParams {
  const float* bias;          // Linear bias (N) or nullptr
  const float* gamma;         // BN weight (N) or nullptr (affine=False)
  const float* beta;          // BN bias (N) or nullptr
  const float* scale;         // scale Parameter: 1 or N values
  int64_t scale_stride;       // 0 for a single scale value, 1 for one per column
  float* running_mean;        // nullptr when the module tracks no running statistics
  float* running_var;
  const int64_t* num_batches_tracked;  // momentum=None: read on the device (no host sync), already bumped
  double momentum;
  bool cumulative_average;    // momentum=None: factor = 1 / num_batches_tracked
  double eps;
};

}  // namespace lbs

#endif  // KFORGE_LINEAR_BN_SOFTMAX_BN_PARAMS_CUH
