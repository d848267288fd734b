// Device math for generated pointwise code: PyTorch's definitions in fp32, NaN-propagating where PyTorch
// propagates (relu, clamp, maximum/minimum), full-precision libm calls (fp32 problems are checked at 1e-4) —
// except the logistic function: its exp and divide run once per element in every sigmoid/SiLU epilogue, and
// libm's (~20 instructions) made a group norm + SiLU apply instruction-bound (ncu: issue 61%, DRAM 22%). The
// hardware exp and approximate divide err by 2 + 1.2|a| ulp (1e-6 relative at |a| = 10, 6e-6 near the
// overflow at |a| = 88, where the value is e^-88); past it exp is inf and the result the limit, as libm's.
#pragma once
#include <math.h>

__device__ __forceinline__ float kf_nan_or(float a, float v) { return a != a ? a : v; }
__device__ __forceinline__ float kf_relu(float a) { return a > 0.f ? a : kf_nan_or(a, 0.f); }
__device__ __forceinline__ float kf_max(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
__device__ __forceinline__ float kf_min(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }
__device__ __forceinline__ float kf_clamp_min(float a, float lo) { return a != a ? a : fmaxf(a, lo); }
__device__ __forceinline__ float kf_clamp_max(float a, float hi) { return a != a ? a : fminf(a, hi); }
__device__ __forceinline__ float kf_sigmoid(float a) { return __fdividef(1.f, 1.f + __expf(-a)); }
__device__ __forceinline__ float kf_silu(float a) { return __fdividef(a, 1.f + __expf(-a)); }
__device__ __forceinline__ float kf_gelu(float a) { return 0.5f * a * (1.f + erff(a * 0.70710678118654752f)); }
__device__ __forceinline__ float kf_gelu_tanh(float a) {
  const float inner = 0.79788456080286536f * (a + 0.044715f * a * a * a);
  return 0.5f * a * (1.f + tanhf(inner));
}
// softplus(a) = log1p(exp(beta*a))/beta, linear above threshold (PyTorch's switch).
__device__ __forceinline__ float kf_softplus(float a, float beta, float threshold) {
  return a * beta > threshold ? a : log1pf(expf(a * beta)) / beta;
}
__device__ __forceinline__ float kf_mish(float a) { return a * tanhf(kf_softplus(a, 1.f, 20.f)); }
__device__ __forceinline__ float kf_elu(float a, float alpha, float scale, float input_scale) {
  return a > 0.f ? a * scale : alpha * scale * expm1f(a * input_scale);
}
__device__ __forceinline__ float kf_leaky_relu(float a, float slope) { return a > 0.f ? a : a * slope; }
__device__ __forceinline__ float kf_hardtanh(float a, float lo, float hi) { return kf_clamp_max(kf_clamp_min(a, lo), hi); }
__device__ __forceinline__ float kf_hardsigmoid(float a) { return kf_clamp_max(kf_clamp_min(a / 6.f + 0.5f, 0.f), 1.f); }
__device__ __forceinline__ float kf_hardswish(float a) { return a * kf_clamp_max(kf_clamp_min(a + 3.f, 0.f), 6.f) / 6.f; }
__device__ __forceinline__ float kf_logsigmoid(float a) { return fminf(a, 0.f) - log1pf(expf(-fabsf(a))); }
__device__ __forceinline__ float kf_softsign(float a) { return a / (1.f + fabsf(a)); }
__device__ __forceinline__ float kf_sign(float a) { return a > 0.f ? 1.f : (a < 0.f ? -1.f : a); }
__device__ __forceinline__ float kf_threshold(float a, float th, float value) { return a > th ? a : value; }
__device__ __forceinline__ float kf_floor_div(float a, float b) { return floorf(a / b); }
// x ** e with PyTorch's special cases done as exact arithmetic (x*x for 2, sqrt for 0.5).
__device__ __forceinline__ float kf_pow(float a, float e) {
  if (e == 2.f) return a * a;
  if (e == 3.f) return a * a * a;
  if (e == 1.f) return a;
  if (e == 0.5f) return sqrtf(a);
  if (e == -1.f) return 1.f / a;
  return powf(a, e);
}
