// Test/bench harness for kf_normalize.cuh and kf_pool.cuh: sample functors of the shape the codegen emits
// (softmax with a fused prologue, log_softmax, affine norms, rms norm; pooling epilogues) and one dispatch
// entry per template, instantiated for fp32 / fp16 / bf16. No torch headers: the nvcc test compiles this file
// alone (ptxas -v), the GPU test and the bench load it with load_inline next to norm_pool_binding.cpp.
#include "kf_normalize.cuh"
#include "kf_normalize_cl.cuh"
#include "kf_pool.cuh"
#include "kf_pool_cl.cuh"

// softmax(x * sc[0] + bias): a two-input prologue, so the held-row paths carry more than one input.
struct SoftmaxPro {
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars& sc) const { return x[0] * sc.v[0] + x[1]; }
};
struct SoftmaxApply {
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&)[kIn], const KfScalars&) const {
    return __fdividef(kf_exp_shifted(v - s.a), s.b);  // as codegen emits softmax (ops/normalize.ts)
  }
};
// softmax(x) * w, output fp32 whatever x's dtype (F.softmax(x, dtype=torch.float32) * buffer): the statistics pass
// reads x alone, the apply a second operand of another dtype (two-input columns_kernel spilled so, fp16 x).
struct FirstOfTwoPro {
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const { return x[0]; }
};
struct SoftmaxScaledApply {
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&x)[kIn], const KfScalars&) const {
    return __fdividef(kf_exp_shifted(v - s.a), s.b) * x[1];
  }
};
// masked_fill(x, mask, -1e9) -> softmax -> max(., lo) -> min(., hi): four inputs, a bool mask among them (the
// columns kernel spilled so under a flat 64-register target).
struct MaskedPro {
  static constexpr int kIn = 4;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const {
    return x[1] != 0.f ? -1e9f : x[0];
  }
};
struct ClampedSoftmaxApply {
  static constexpr int kIn = 4;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&x)[kIn], const KfScalars&) const {
    return fminf(fmaxf(__fdividef(kf_exp_shifted(v - s.a), s.b), x[2]), x[3]);
  }
};
// where(x < -1, -1e4, x) -> softmax: one input and a select in the prologue (held rows recomputing the
// prologue per pass kept the compare beside 24 held values: 48 bytes spilled).
struct SelectPro {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const {
    return x[0] < -1.f ? -10000.f : x[0];
  }
};
struct SoftmaxOneApply {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&)[kIn], const KfScalars&) const {
    return __fdividef(kf_exp_shifted(v - s.a), s.b);
  }
};
struct LogSoftmaxPro {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const { return x[0]; }
};
struct LogSoftmaxApply {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&)[kIn], const KfScalars&) const {
    return v - s.a - logf(s.b);
  }
};
// The same prologues asking for the long held rows (rows of 16K-32K: kf_normalize.cuh's kLongRows).
struct LogSoftmaxLongPro : LogSoftmaxPro {
  static constexpr bool kLongRows = true;
};
// layer / group / instance / batch norm: (x - mean) * rsqrt(var + eps) * gamma + beta, eps = sc[0].
struct AffinePro {
  static constexpr int kIn = 3;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const { return x[0]; }
};
struct AffineLongPro : AffinePro {
  static constexpr bool kLongRows = true;
};
struct AffineApply {
  static constexpr int kIn = 3;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&x)[kIn], const KfScalars& sc) const {
    return (v - s.a) * rsqrtf(s.b / s.count + sc.v[0]) * x[1] + x[2];
  }
};
// rms norm: x * rsqrt(mean(x^2) + eps) * gamma.
struct RmsPro {
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const { return x[0]; }
};
struct RmsApply {
  static constexpr int kIn = 2;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&x)[kIn], const KfScalars& sc) const {
    return v * rsqrtf(s.a + sc.v[0]) * x[1];
  }
};

// KernelBench level 2's conv -> + bias -> * scale -> sigmoid -> group norm, plus a residual scaled per channel:
// eight inputs (x, conv bias, bias, scale, gamma, beta, residual, residual scale), eleven in the channels-last
// apply with the statistics (KF_EW_MAX_IN).
struct WidePro {
  static constexpr int kIn = 8;
  __device__ __forceinline__ float operator()(const float (&x)[kIn], const KfScalars&) const {
    return 1.f / (1.f + expf(-(x[0] + x[1] + x[2]) * x[3]));
  }
};
struct WideApply {
  static constexpr int kIn = 8;
  __device__ __forceinline__ float operator()(float v, const KfStats& s, const float (&x)[kIn], const KfScalars& sc) const {
    return (v - s.a) * rsqrtf(s.b / s.count + sc.v[0]) * x[4] + x[5] + x[6] * x[7];
  }
};

// Pool epilogues: none (kIn = 0 convention), and pooled * sc[0] + extra (a per-channel bias or a residual).
struct PoolEpiIdentity {
  static constexpr int kIn = 0;
  __device__ __forceinline__ float operator()(float pooled, const float (&)[kf_slots(kIn)], const KfScalars&) const { return pooled; }
};
struct PoolEpiScaleAdd {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(float pooled, const float (&x)[kIn], const KfScalars& sc) const {
    return pooled * sc.v[0] + x[0];
  }
};
// A prologue of every tap reading the operand the epilogue reads too (a per-channel one): tanh(tap + x).
struct PoolProAddTanh {
  static constexpr int kIn = 1;
  __device__ __forceinline__ float operator()(float tap, const float (&x)[kIn], const KfScalars&) const {
    return tanhf(tap + x[0]);
  }
};

// *_CL: the same functors through kf_launch_normalize_cl (an input transposed against the output).
enum HarnessNormOp {
  OP_SOFTMAX = 0,
  OP_LOG_SOFTMAX = 1,
  OP_AFFINE = 2,
  OP_RMS = 3,
  OP_AFFINE_F32_PARAMS = 4,
  OP_AFFINE_CL = 5,
  OP_SOFTMAX_CL = 6,
  OP_AFFINE_STATS = 7,  // kf_launch_normalize_stats: statistics only, the output untouched
  OP_SOFTMAX_SCALED_F32_OUT = 8,  // x of the dtype, an fp32 operand in the apply, fp32 output
  OP_SOFTMAX_MASKED_CLAMPED = 9,  // x, a bool mask, two operands of the dtype
  OP_SOFTMAX_SELECTED = 10,       // x alone, a select in the prologue
  OP_WIDE = 11,                   // WidePro / WideApply: eight inputs, the plain launcher
  OP_WIDE_CL = 12,                // the same through kf_launch_normalize_cl
  OP_LOG_SOFTMAX_LONG = 13,       // OP_LOG_SOFTMAX / OP_AFFINE with the long held rows instantiated
  OP_AFFINE_LONG = 14
};
enum HarnessDtype { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 };

template <typename T>
static cudaError_t norm_typed(int op, const KfShape& shape, uint32_t mask, void* out, const KfTensorRef* in,
                              const KfScalars& sc, float* stats_out, void* ws, size_t wsb, cudaStream_t stream) {
  switch (op) {
    case OP_SOFTMAX:
      return kf_launch_normalize<SoftmaxPro, KfStatMaxSumExp, SoftmaxApply, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_LOG_SOFTMAX:
      return kf_launch_normalize<LogSoftmaxPro, KfStatMaxSumExp, LogSoftmaxApply, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_AFFINE:
      return kf_launch_normalize<AffinePro, KfStatWelford, AffineApply, T, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_RMS:
      return kf_launch_normalize<RmsPro, KfStatMeanSquare, RmsApply, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_AFFINE_F32_PARAMS:
      return kf_launch_normalize<AffinePro, KfStatWelford, AffineApply, T, T, float, float>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_AFFINE_CL:
      return kf_launch_normalize_cl<AffinePro, KfStatWelford, AffineApply, T, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_SOFTMAX_CL:
      return kf_launch_normalize_cl<SoftmaxPro, KfStatMaxSumExp, SoftmaxApply, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_AFFINE_STATS:
      return kf_launch_normalize_stats<AffinePro, KfStatWelford, T, T, T>(shape, mask, in, sc, stats_out, ws, wsb, stream);
    case OP_SOFTMAX_SCALED_F32_OUT:
      return kf_launch_normalize<FirstOfTwoPro, KfStatMaxSumExp, SoftmaxScaledApply, float, T, float>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_SOFTMAX_MASKED_CLAMPED:
      return kf_launch_normalize<MaskedPro, KfStatMaxSumExp, ClampedSoftmaxApply, T, T, bool, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_SOFTMAX_SELECTED:
      return kf_launch_normalize<SelectPro, KfStatMaxSumExp, SoftmaxOneApply, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_WIDE:
      return kf_launch_normalize<WidePro, KfStatWelford, WideApply, T, T, T, T, T, T, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_WIDE_CL:
      return kf_launch_normalize_cl<WidePro, KfStatWelford, WideApply, T, T, T, T, T, T, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_LOG_SOFTMAX_LONG:
      return kf_launch_normalize<LogSoftmaxLongPro, KfStatMaxSumExp, LogSoftmaxApply, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case OP_AFFINE_LONG:
      return kf_launch_normalize<AffineLongPro, KfStatWelford, AffineApply, T, T, T, T>(shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

size_t kfh_norm_workspace(int op, const KfShape& shape, uint32_t mask) {
  switch (op) {
    case OP_SOFTMAX:
    case OP_SOFTMAX_SCALED_F32_OUT:
    case OP_SOFTMAX_MASKED_CLAMPED:
    case OP_SOFTMAX_SELECTED:
    case OP_LOG_SOFTMAX_LONG:
    case OP_LOG_SOFTMAX: return kf_normalize_workspace_bytes<KfStatMaxSumExp>(shape, mask);
    case OP_RMS: return kf_normalize_workspace_bytes<KfStatMeanSquare>(shape, mask);
    case OP_AFFINE_CL:
    case OP_WIDE_CL: return kf_normalize_cl_workspace_bytes<KfStatWelford>(shape, mask);
    case OP_SOFTMAX_CL: return kf_normalize_cl_workspace_bytes<KfStatMaxSumExp>(shape, mask);
    case OP_AFFINE_STATS: return kf_normalize_stats_workspace_bytes<KfStatWelford>(shape, mask);
    default: return kf_normalize_workspace_bytes<KfStatWelford>(shape, mask);
  }
}

cudaError_t kfh_norm(int op, int dtype, const KfShape& shape, uint32_t mask, void* out, const KfTensorRef* in,
                     const KfScalars& sc, float* stats_out, void* ws, size_t wsb, cudaStream_t stream) {
  switch (dtype) {
    case DT_F32: return norm_typed<float>(op, shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case DT_F16: return norm_typed<__half>(op, shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    case DT_BF16: return norm_typed<__nv_bfloat16>(op, shape, mask, out, in, sc, stats_out, ws, wsb, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
static cudaError_t pool_typed(int kind, int epi, const KfPoolParams& p, const void* in, void* out, const KfTensorRef* extra,
                              const KfScalars& sc, cudaStream_t stream) {
  if (kind == KF_POOL_MAX && epi == 0) return kf_launch_pool<KF_POOL_MAX, KfPoolNoPrologue, PoolEpiIdentity, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_MAX && epi == 1) return kf_launch_pool<KF_POOL_MAX, KfPoolNoPrologue, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_MAX && epi == 2) return kf_launch_pool<KF_POOL_MAX, PoolProAddTanh, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 0) return kf_launch_pool<KF_POOL_AVG, KfPoolNoPrologue, PoolEpiIdentity, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 1) return kf_launch_pool<KF_POOL_AVG, KfPoolNoPrologue, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 2) return kf_launch_pool<KF_POOL_AVG, PoolProAddTanh, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  return cudaErrorInvalidValue;
}

cudaError_t kfh_pool(int kind, int epi, int dtype, const KfPoolParams& p, const void* in, void* out,
                     const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
  switch (dtype) {
    case DT_F32: return pool_typed<float>(kind, epi, p, in, out, extra, sc, stream);
    case DT_F16: return pool_typed<__half>(kind, epi, p, in, out, extra, sc, stream);
    case DT_BF16: return pool_typed<__nv_bfloat16>(kind, epi, p, in, out, extra, sc, stream);
    default: return cudaErrorInvalidValue;
  }
}

// Windows (KD, KH, KW, SH) kf_launch_pool_fixed is instantiated for; norm_pool_ext.FIXED_WINDOWS lists them.
#define KFH_FIXED_WINDOWS(X) X(1, 3, 3, 2) X(1, 2, 2, 2) X(1, 1, 4, 1) X(3, 3, 3, 2) X(1, 3, 2, 2) X(1, 3, 3, 1)

template <int KD, int KH, int KW, int SH, typename T>
static cudaError_t pool_fixed_window(int kind, int epi, const KfPoolParams& p, const void* in, void* out,
                                     const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
  if (kind == KF_POOL_MAX && epi == 0)
    return kf_launch_pool_fixed<KF_POOL_MAX, KD, KH, KW, SH, KfPoolNoPrologue, PoolEpiIdentity, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_MAX && epi == 1)
    return kf_launch_pool_fixed<KF_POOL_MAX, KD, KH, KW, SH, KfPoolNoPrologue, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_MAX && epi == 2)
    return kf_launch_pool_fixed<KF_POOL_MAX, KD, KH, KW, SH, PoolProAddTanh, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 0)
    return kf_launch_pool_fixed<KF_POOL_AVG, KD, KH, KW, SH, KfPoolNoPrologue, PoolEpiIdentity, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 1)
    return kf_launch_pool_fixed<KF_POOL_AVG, KD, KH, KW, SH, KfPoolNoPrologue, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 2)
    return kf_launch_pool_fixed<KF_POOL_AVG, KD, KH, KW, SH, PoolProAddTanh, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  return cudaErrorInvalidValue;
}

template <typename T>
static cudaError_t pool_fixed_typed(const int (&w)[4], int kind, int epi, const KfPoolParams& p, const void* in,
                                    void* out, const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
#define KFH_TRY(KD, KH, KW, SH)                                        \
  if (w[0] == KD && w[1] == KH && w[2] == KW && w[3] == SH)            \
    return pool_fixed_window<KD, KH, KW, SH, T>(kind, epi, p, in, out, extra, sc, stream);
  KFH_FIXED_WINDOWS(KFH_TRY)
#undef KFH_TRY
  return cudaErrorNotSupported;
}

cudaError_t kfh_pool_fixed(const int (&window)[4], int kind, int epi, int dtype, const KfPoolParams& p, const void* in,
                           void* out, const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
  switch (dtype) {
    case DT_F32: return pool_fixed_typed<float>(window, kind, epi, p, in, out, extra, sc, stream);
    case DT_F16: return pool_fixed_typed<__half>(window, kind, epi, p, in, out, extra, sc, stream);
    case DT_BF16: return pool_fixed_typed<__nv_bfloat16>(window, kind, epi, p, in, out, extra, sc, stream);
    default: return cudaErrorInvalidValue;
  }
}

// kf_launch_pool_cl: a channels-last input, the same sample functors (epi 0: none, 1: scale + add, 2: prologue),
// the kernel for any window (KD = KH = KW = 0) or one unrolled for (KD, KH, KW) (KFH_CL_WINDOWS; another window
// takes the first).
#define KFH_CL_WINDOWS(X) X(0, 0, 0) X(1, 2, 2) X(1, 3, 3) X(2, 2, 2) X(1, 4, 4)

template <int KD, int KH, int KW, typename T>
static cudaError_t pool_cl_window(int kind, int epi, const KfPoolParams& p, const void* in, void* out,
                                  const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
  if (kind == KF_POOL_MAX && epi == 0)
    return kf_launch_pool_cl<KF_POOL_MAX, KD, KH, KW, KfPoolNoPrologue, PoolEpiIdentity, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_MAX && epi == 1)
    return kf_launch_pool_cl<KF_POOL_MAX, KD, KH, KW, KfPoolNoPrologue, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_MAX && epi == 2)
    return kf_launch_pool_cl<KF_POOL_MAX, KD, KH, KW, PoolProAddTanh, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 0)
    return kf_launch_pool_cl<KF_POOL_AVG, KD, KH, KW, KfPoolNoPrologue, PoolEpiIdentity, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 1)
    return kf_launch_pool_cl<KF_POOL_AVG, KD, KH, KW, KfPoolNoPrologue, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  if (kind == KF_POOL_AVG && epi == 2)
    return kf_launch_pool_cl<KF_POOL_AVG, KD, KH, KW, PoolProAddTanh, PoolEpiScaleAdd, T, T, T>(p, in, out, extra, sc, stream);
  return cudaErrorInvalidValue;
}

template <typename T>
static cudaError_t pool_cl_typed(const int (&w)[3], int kind, int epi, const KfPoolParams& p, const void* in,
                                 void* out, const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
#define KFH_TRY(KD, KH, KW) \
  if (w[0] == KD && w[1] == KH && w[2] == KW) return pool_cl_window<KD, KH, KW, T>(kind, epi, p, in, out, extra, sc, stream);
  KFH_CL_WINDOWS(KFH_TRY)
#undef KFH_TRY
  return cudaErrorNotSupported;
}

cudaError_t kfh_pool_cl(const int (&window)[3], int kind, int epi, int dtype, const KfPoolParams& p, const void* in,
                        void* out, const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream) {
  switch (dtype) {
    case DT_F32: return pool_cl_typed<float>(window, kind, epi, p, in, out, extra, sc, stream);
    case DT_F16: return pool_cl_typed<__half>(window, kind, epi, p, in, out, extra, sc, stream);
    case DT_BF16: return pool_cl_typed<__nv_bfloat16>(window, kind, epi, p, in, out, extra, sc, stream);
    default: return cudaErrorInvalidValue;
  }
}
