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
// sin / cos. libm's sinf/cosf reduce |a| > 105615 with Payne-Hanek, whose table walk lives in local memory:
// every kernel calling them carried a 32-byte stack frame. Here the reduction is one multiply in double
// (a * 2/pi has relative error 2^-53, so the fraction left is good to 1e-10 for |a| < 1e6), and the sine or
// cosine of the remainder in [-pi/4, pi/4] is Cephes' sinf/cosf polynomial (within 2 fp32 ulp). NaN and inf
// give NaN. The host (the kernel emulator) takes libm's, as PyTorch's CPU kernels do.
#ifdef __CUDACC__
// The sine of a * pi/2 turned `quarter` quarter turns further (0: sin, 1: cos).
__device__ __forceinline__ float kf_sin_quadrant(float a, int quarter) {
  const double t = static_cast<double>(a) * 0.63661977236758134308;
  const double j = rint(t);
  const float r = static_cast<float>((t - j) * 1.57079632679489661923);
  const int q = (static_cast<int>(static_cast<long long>(j) & 3) + quarter) & 3;
  const float z = r * r;
  const float s = fmaf(fmaf(fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f), z * r, r);
  const float c = fmaf(fmaf(fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f), z, 4.166664568298827e-2f),
                       z * z, fmaf(-0.5f, z, 1.f));
  const float v = (q & 1) ? c : s;
  return (q & 2) ? -v : v;
}
__device__ __forceinline__ float kf_sin(float a) { return kf_sin_quadrant(a, 0); }
__device__ __forceinline__ float kf_cos(float a) { return kf_sin_quadrant(a, 1); }
#else
__device__ __forceinline__ float kf_sin(float a) { return sinf(a); }
__device__ __forceinline__ float kf_cos(float a) { return cosf(a); }
#endif
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
// a / 6.f without the IEEE divide's slow path: that is a called subroutine, and its calling convention spilled
// the registers live across it in a pool's tap loop. The product with RN(1/6) is corrected once by its FMA
// remainder, infinities passed through (their remainder is NaN), the sign q's (-0's remainder is +0, and
// +0 + +0 would lose it). Checked against a / 6.f over all 2^32 floats on the H200
// (test/gpu/test_pointwise_exact.py): every normal quotient equal; subnormal quotients, where the remainder
// underflows, may differ in the last place.
__device__ __forceinline__ float kf_div6(float a) {
  const float q = a * (1.f / 6.f);
  return fabsf(q) == INFINITY ? q : copysignf(fmaf(fmaf(-q, 6.f, a), 1.f / 6.f, q), q);
}
__device__ __forceinline__ float kf_hardsigmoid(float a) { return kf_clamp_max(kf_clamp_min(kf_div6(a) + 0.5f, 0.f), 1.f); }
__device__ __forceinline__ float kf_hardswish(float a) { return kf_div6(a * kf_clamp_max(kf_clamp_min(a + 3.f, 0.f), 6.f)); }
__device__ __forceinline__ float kf_logsigmoid(float a) { return fminf(a, 0.f) - log1pf(expf(-fabsf(a))); }
__device__ __forceinline__ float kf_softsign(float a) { return a / (1.f + fabsf(a)); }
// PyTorch's (0 < a) - (a < 0): NaN and -0 give +0.
__device__ __forceinline__ float kf_sign(float a) { return (a > 0.f ? 1.f : 0.f) - (a < 0.f ? 1.f : 0.f); }
// PyTorch's `a <= th ? value : a`: NaN passes through.
__device__ __forceinline__ float kf_threshold(float a, float th, float value) { return a <= th ? value : a; }
__device__ __forceinline__ float kf_softshrink(float a, float l) { return a > l ? a - l : (a < -l ? a + l : a * 0.f); }
__device__ __forceinline__ float kf_hardshrink(float a, float l) { return (a >= -l && a <= l) ? 0.f : a; }
// Python's modulo (torch.remainder, x % y): the sign of the divisor, from the exact fmod.
__device__ __forceinline__ float kf_remainder(float a, float b) {
  const float mod = fmodf(a, b);
  return (mod != 0.f && (b < 0.f) != (mod < 0.f)) ? mod + b : mod;
}
// PyTorch's lerp: from whichever end is nearer the weight, so weight 1 gives `end` exactly.
__device__ __forceinline__ float kf_lerp(float a, float b, float w) {
  return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.f - w);
}
// PyTorch's: equal infinities are their own sum (inf - inf would be nan), else the larger plus a log1p.
__device__ __forceinline__ float kf_logaddexp(float a, float b) {
  if (isinf(a) && a == b) return a;
  return fmaxf(a, b) + log1pf(expf(-fabsf(a - b)));
}
// torch.logaddexp2: as logaddexp, in base 2 (log1p(2^-|d|) / ln 2).
__device__ __forceinline__ float kf_logaddexp2(float a, float b) {
  if (isinf(a) && a == b) return a;
  return fmaxf(a, b) + log1pf(exp2f(-fabsf(a - b))) * 1.4426950408889634f;
}
// torch.sinc: sin(pi a) / (pi a) of the rounded product, 1 at 0.
__device__ __forceinline__ float kf_sinc(float a) {
  if (a == 0.f) return 1.f;
  const float product = 3.14159265358979323846f * a;
  return kf_sin(product) / product;
}
// torch.heaviside: `values` at 0, else the step (0 for NaN, as PyTorch's `a > 0`).
__device__ __forceinline__ float kf_heaviside(float a, float values) { return a == 0.f ? values : (a > 0.f ? 1.f : 0.f); }
// torch.xlogy / special.xlog1py: NaN from y, 0 where x is 0 (even for y = 0 or inf).
__device__ __forceinline__ float kf_xlogy(float x, float y) {
  if (y != y) return y;
  return x == 0.f ? 0.f : x * logf(y);
}
__device__ __forceinline__ float kf_xlog1py(float x, float y) {
  if (y != y) return y;
  return x == 0.f ? 0.f : x * log1pf(y);
}
// torch.special.entr: -x log x, 0 at 0, -inf below 0, NaN kept.
__device__ __forceinline__ float kf_entr(float a) {
  if (a != a) return a;
  if (a > 0.f) return -a * logf(a);
  return a == 0.f ? 0.f : -INFINITY;
}
#ifndef __CUDACC__
// The host (the op-math test, the kernel emulator) has no erfcxf: exp(x^2) erfc(x) in double, the asymptotic
// series where erfc underflows.
inline float erfcxf(float a) {
  const double x = a;
  if (x < 25.0) return static_cast<float>(exp(x * x) * erfc(x));
  const double inv = 1.0 / (x * x);
  return static_cast<float>((1.0 - 0.5 * inv + 0.75 * inv * inv) / (x * 1.7724538509055160273));
}
#endif
// torch.special.ndtr and log_ndtr (PyTorch's formulas: erfcx keeps log_ndtr finite far into the left tail).
__device__ __forceinline__ float kf_ndtr(float a) { return 0.5f * erfcf(-a * 0.70710678118654752f); }
__device__ __forceinline__ float kf_log_ndtr(float a) {
  const float t = a * 0.70710678118654752f;
  if (a < -1.f) return logf(erfcxf(-t) * 0.5f) - t * t;
  return log1pf(-erfcf(t) * 0.5f);
}
// torch.logit: the input clamped to [eps, 1 - eps] first when eps is given (NaN passes through the clamp).
__device__ __forceinline__ float kf_logit(float a) { return logf(a / (1.f - a)); }
__device__ __forceinline__ float kf_logit_eps(float a, float eps) {
  const float z = a < eps ? eps : (a > 1.f - eps ? 1.f - eps : a);
  return logf(z / (1.f - z));
}
// torch.round(decimals=d): rint of the scaled value, scaled back (by 10^-d's reciprocal for d < 0), as ATen.
__device__ __forceinline__ float kf_round_decimals(float a, float ten_pow, bool negative) {
  return negative ? rintf(a / ten_pow) * ten_pow : rintf(a * ten_pow) / ten_pow;
}
// torch.nan_to_num: NaN, +inf and -inf replaced (inf is isinf's, not a comparison that fast math could fold).
__device__ __forceinline__ float kf_nan_to_num(float a, float nan, float posinf, float neginf) {
  if (a != a) return nan;
  return isinf(a) ? (a > 0.f ? posinf : neginf) : a;
}
// PyTorch's div_floor_floating: the quotient from the exact remainder, so a / b rounding up to an integer
// (1 / 0.1f is 10.f) does not floor to one more than the true quotient's floor (9).
__device__ __forceinline__ float kf_floor_div(float a, float b) {
  if (b == 0.f) return a / b;
  const float mod = fmodf(a, b);
  float div = (a - mod) / b;
  if (mod != 0.f && (b < 0.f) != (mod < 0.f)) div -= 1.f;
  if (div == 0.f) return copysignf(0.f, a / b);
  float floordiv = floorf(div);
  if (div - floordiv > 0.5f) floordiv += 1.f;
  return floordiv;
}
// A cast to half precision and back (x.half() / x.to(torch.bfloat16) inside a region): the value rounded to the
// nearest representable one, ties to even, as PyTorch's conversion rounds. On the device the conversion
// intrinsics; on the host (the op-math test) the same rounding from the exponent: keep `bits` significant bits
// in the normal range, steps of `tiny` below it, past `huge` infinity.
__device__ __forceinline__ float kf_round_bits(float a, int bits, float min_normal, float tiny, float huge) {
  const float m = fabsf(a);
  if (a != a || m == INFINITY) return a;
  if (m >= huge) return copysignf(INFINITY, a);
  if (m < min_normal) return copysignf(rintf(m / tiny) * tiny, a);
  int e;
  frexpf(m, &e);
  return copysignf(ldexpf(rintf(ldexpf(m, bits - e)), e - bits), a);
}
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float kf_round_f16(float a) { return __half2float(__float2half_rn(a)); }
__device__ __forceinline__ float kf_round_bf16(float a) { return __bfloat162float(__float2bfloat16_rn(a)); }
#else
__device__ __forceinline__ float kf_round_f16(float a) { return kf_round_bits(a, 11, 0x1p-14f, 0x1p-24f, 65520.f); }
__device__ __forceinline__ float kf_round_bf16(float a) {
  return kf_round_bits(a, 8, 0x1p-126f, 0x1p-133f, 0x1.ffp127f);
}
#endif
// x ** e with PyTorch's special cases done as exact arithmetic (x*x for 2, sqrt for 0.5).
__device__ __forceinline__ float kf_pow(float a, float e) {
  if (e == 2.f) return a * a;
  if (e == 3.f) return a * a * a;
  if (e == 1.f) return a;
  if (e == 0.5f) return sqrtf(a);
  if (e == -1.f) return 1.f / a;
  return powf(a, e);
}
