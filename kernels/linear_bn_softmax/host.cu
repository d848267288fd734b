// Host side of the recipe: input checks, the cuBLAS GEMMs and the kernel launches, all on the current
// stream with no device synchronisation. Allocations: the output (which doubles as the GEMM result Y,
// the row pass runs in place) and documented scratch from PyTorch's caching allocator -
//   fp32-accurate mode: the 3xTF32 split of x (3*M*K floats) and, when the caller passes no cached
//                       split, the split of the weight (3*N*K floats);
//   training mode:      row-tile partials (2*ceil(M/128)*N floats);
//   always:             the per-column affine (3*N floats).
// API used exists in PyTorch 2.1 / CUDA 12.1 as well.
// Light ATen headers only (the binding file includes torch/extension.h): keeps this nvcc compile short.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <c10/util/Optional.h>

// Only c10/cuda headers and cublas_v2.h: ATen/cuda/CUDAContext.h pulls in cuSOLVER headers, which the
// CPU-only CI machine (cuBLAS/cuSPARSE headers from the nvidia wheels) lacks.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

// The kernels, one per file; kforge emit inlines them here, so the extension is one translation unit.
#include "common.cuh"
#include "bn_params.cuh"
#include "split_tf32.cu"
#include "column_stats.cu"
#include "bn_train_finalize.cu"
#include "bn_eval_params.cu"
#include "norm_softmax.cu"

namespace lbs {

namespace {

// Numbers go into error messages as text made here: on the device host (torch 2.11 wheel, g++ 13) a TORCH_CHECK
// message with an int argument crashed the process in the ostream insertion (attention's run 44).
template <typename N>
std::string txt(N x) { return std::to_string(x); }
std::string txt(c10::IntArrayRef xs) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
  return s + "]";
}

void check_float_vector(const c10::optional<at::Tensor>& t, const char* name, int64_t n, const at::Tensor& x) {
  if (!t.has_value()) return;
  TORCH_CHECK(t->is_cuda() && t->device() == x.device(), "linear_bn_softmax: ", name, " must be on ", x.device());
  TORCH_CHECK(t->scalar_type() == at::kFloat, "linear_bn_softmax: ", name, " must be float32, got ", t->scalar_type());
  TORCH_CHECK(t->dim() == 1 && t->size(0) == n && t->is_contiguous(), "linear_bn_softmax: ", name,
              " must be a contiguous vector of ", txt(n), " values, got shape ", txt(t->sizes()));
}

const float* ptr_or_null(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? t->data_ptr<float>() : nullptr;
}

#define LBS_CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                          \
    const cublasStatus_t lbs_status = (expr);                                                   \
    TORCH_CHECK(lbs_status == CUBLAS_STATUS_SUCCESS, "linear_bn_softmax: ", #expr, " failed: ", \
                cublasGetStatusString(lbs_status));                                             \
  } while (0)

int multiprocessor_count(int device) {
  thread_local std::vector<int> counts;
  if (static_cast<int>(counts.size()) <= device) counts.resize(device + 1, 0);
  if (counts[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device));
  }
  return counts[device];
}

// Our own cuBLAS handle, one per (thread, device) as cuBLAS asks; created on first use and kept for
// the life of the thread (destroying handles at thread exit can run after the CUDA context is gone).
// Its math mode is set once: TF32 tensor-op math is what both modes ask for (3xTF32 builds fp32
// accuracy out of TF32 products); no caller-visible handle state is touched.
cublasHandle_t blas_handle(int device, cudaStream_t stream) {
  thread_local std::vector<cublasHandle_t> handles;
  if (static_cast<int>(handles.size()) <= device) handles.resize(device + 1, nullptr);
  if (handles[device] == nullptr) {
    cublasHandle_t handle = nullptr;
    LBS_CUBLAS_CHECK(cublasCreate(&handle));
    LBS_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH));
    LBS_CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
    handles[device] = handle;
  }
  LBS_CUBLAS_CHECK(cublasSetStream(handles[device], stream));
  return handles[device];
}

int launch_blocks_for(int64_t work_items, int threads, int device) {
  const int64_t sms = multiprocessor_count(device);
  const int64_t wanted = (work_items + threads - 1) / threads;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, sms * 16)));
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Y[M,N] (row-major) = beta * Y + A[M,K] * B[N,K]^T on tensor cores in TF32 with fp32 accumulation.
// Column-major view for cuBLAS: Y^T (N x M) = B (K x N)^T * A^T (K x M), i.e. TN - nn.Linear's layout.
// `k` is the reduction length of this call, `ld` the row stride of a and b (>= k: K-chunks are views).
void gemm_tf32_nt(cublasHandle_t handle, const float* a, const float* b, float* y, int64_t m, int64_t n,
                  int64_t k, float beta, int64_t ld) {
  const float alpha = 1.0f;
  LBS_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &alpha, b, CUDA_R_32F, static_cast<int>(ld), a, CUDA_R_32F,
                                    static_cast<int>(ld), &beta, y, CUDA_R_32F, static_cast<int>(n),
                                    CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
}

// src (rows x k, contiguous) -> dst (rows x 3k) in split_tf32.cu's interleaved layout.
void launch_split_interleaved(const float* src, float* dst, int64_t rows, int64_t k, int64_t chunk, bool a_side,
                              cudaStream_t stream) {
  if (rows == 0 || k == 0) return;
  const bool vec4 = k % 4 == 0 && chunk % 4 == 0 && aligned16(src) && aligned16(dst);
  const int64_t units = vec4 ? k / 4 : k;
  const dim3 grid(static_cast<unsigned>((units + kSplitThreads - 1) / kSplitThreads),
                  static_cast<unsigned>(std::min<int64_t>(rows, 65535)));
  if (vec4) {
    split_tf32_interleaved_kernel<true><<<grid, kSplitThreads, 0, stream>>>(
        src, dst, rows, static_cast<int>(k), static_cast<int>(chunk), a_side);
  } else {
    split_tf32_interleaved_kernel<false><<<grid, kSplitThreads, 0, stream>>>(
        src, dst, rows, static_cast<int>(k), static_cast<int>(chunk), a_side);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

int64_t effective_chunk(int64_t chunk, int64_t k) { return chunk > 0 && chunk < k ? chunk : k; }

}  // namespace

}  // namespace lbs

// (rows, 3 * k): the weight's 3xTF32 split in the K-interleaved B-side layout for this chunk length
// (split_tf32.cu). The Python side caches it, keyed on the weight's identity, version counter and
// the chunk length, and passes it back to forward() as weight_split.
at::Tensor split_weight_tf32x3(const at::Tensor& weight, int64_t chunk) {
  TORCH_CHECK(weight.is_cuda(), "split_weight_tf32x3: weight must be a CUDA tensor");
  TORCH_CHECK(weight.scalar_type() == at::kFloat, "split_weight_tf32x3: weight must be float32, got ",
              weight.scalar_type());
  TORCH_CHECK(weight.dim() == 2 && weight.is_contiguous(), "split_weight_tf32x3: weight must be contiguous 2-D");
  TORCH_CHECK(weight.size(1) <= INT_MAX / 3, "split_weight_tf32x3: too many input features");
  const c10::cuda::CUDAGuard guard(weight.device());
  const int64_t n = weight.size(0), k = weight.size(1);
  at::Tensor out = at::empty({n, 3 * k}, weight.options());
  lbs::launch_split_interleaved(weight.data_ptr<float>(), out.data_ptr<float>(), n, k,
                                lbs::effective_chunk(chunk, k), /*a_side=*/false,
                                c10::cuda::getCurrentCUDAStream());
  return out;
}

// Y = x W^T (no bias: it cancels under batch statistics and is folded into the per-column affine
// otherwise), fp32 CUDA tensors. Launched on its own so the caller's remaining host work overlaps the GEMM.
//   fp32_accurate: 3xTF32 (error at fp32 level); otherwise one TF32 GEMM (allow_tf32 semantics)
//   k_chunk:       3xTF32 only: K-chunk length of the interleaved layout (<= 0: all of K)
//   weight_split:  3xTF32 only: split_weight_tf32x3(weight, k_chunk), or None to split here
at::Tensor linear_no_bias(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& weight_split,
                          bool fp32_accurate, int64_t k_chunk) {
  using namespace lbs;
  TORCH_CHECK(x.is_cuda(), "linear_bn_softmax: x must be a CUDA tensor");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "linear_bn_softmax: x must be float32, got ", x.scalar_type());
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "linear_bn_softmax: x must be a contiguous 2-D tensor, got shape ",
              txt(x.sizes()));
  TORCH_CHECK(weight.device() == x.device() && weight.scalar_type() == at::kFloat && weight.dim() == 2 &&
                  weight.is_contiguous(),
              "linear_bn_softmax: weight must be a contiguous float32 2-D tensor on ", x.device());
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  TORCH_CHECK(weight.size(1) == k, "linear_bn_softmax: weight has ", txt(weight.size(1)), " input features, x has ", txt(k));
  TORCH_CHECK(m > 0 && n > 0 && k > 0, "linear_bn_softmax: empty problem (", txt(m), "x", txt(k), " times ", txt(n), "x", txt(k), ")");
  TORCH_CHECK(m <= INT_MAX && n <= INT_MAX && k <= INT_MAX, "linear_bn_softmax: sizes exceed cuBLAS's int range");
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();

  // The output tensor holds Y; bn_scale_softmax_ overwrites it in place.
  at::Tensor y = at::empty({m, n}, x.options());
  {
    cublasHandle_t handle = blas_handle(x.get_device(), stream);
    float* yp = y.data_ptr<float>();
    if (fp32_accurate) {
      TORCH_CHECK(k <= INT_MAX / 3, "linear_bn_softmax: too many input features for the 3xTF32 layout");
      const int64_t chunk = effective_chunk(k_chunk, k);
      at::Tensor x_split = at::empty({m, 3 * k}, x.options());
      launch_split_interleaved(x.data_ptr<float>(), x_split.data_ptr<float>(), m, k, chunk, /*a_side=*/true, stream);
      at::Tensor w_split;
      if (weight_split.has_value()) {
        w_split = *weight_split;
        TORCH_CHECK(w_split.device() == x.device() && w_split.scalar_type() == at::kFloat &&
                        w_split.is_contiguous() && w_split.dim() == 2 && w_split.size(0) == n &&
                        w_split.size(1) == 3 * k,
                    "linear_bn_softmax: weight_split must be split_weight_tf32x3(weight, k_chunk), shape (", n,
                    ", ", 3 * k, ")");
      } else {
        w_split = at::empty({n, 3 * k}, x.options());
        launch_split_interleaved(weight.data_ptr<float>(), w_split.data_ptr<float>(), n, k, chunk,
                                 /*a_side=*/false, stream);
      }
      // One GEMM per K-chunk over its 3*len interleaved columns (small*big, big*small, big*big), the
      // chunks summed into Y by the fp32 epilogue (beta = 1, round to nearest). The tensor cores'
      // accumulator truncates, so its error grows with the accumulation length: over all of K = 8192
      // the result would be less accurate than a CUDA-core SGEMM; the chunk length bounds it.
      const float* const xs = x_split.data_ptr<float>();
      const float* const ws = w_split.data_ptr<float>();
      for (int64_t k0 = 0; k0 < k; k0 += chunk) {
        const int64_t len = std::min(chunk, k - k0);
        gemm_tf32_nt(handle, xs + 3 * k0, ws + 3 * k0, yp, m, n, 3 * len, k0 == 0 ? 0.0f : 1.0f, 3 * k);
      }
    } else {
      gemm_tf32_nt(handle, x.data_ptr<float>(), weight.data_ptr<float>(), yp, m, n, k, 0.0f, k);
    }
  }

  return y;
}

// y <- softmax(scale * BatchNorm1d(y + b), dim=1), in place, for y = linear_no_bias(x, W) (fp32, CUDA).
//   use_batch_stats:      normalise with this batch's statistics (training, or no running stats)
//   update_running_stats: also update running_mean / running_var
//   num_batches_tracked:  given exactly when nn.BatchNorm1d would bump it (training with tracked
//                         stats): this call adds 1 on the device, before momentum=None reads it
at::Tensor bn_scale_softmax_(const at::Tensor& y, const c10::optional<at::Tensor>& bias,
                             const c10::optional<at::Tensor>& gamma, const c10::optional<at::Tensor>& beta,
                             const at::Tensor& scale, const c10::optional<at::Tensor>& running_mean,
                             const c10::optional<at::Tensor>& running_var,
                             const c10::optional<at::Tensor>& num_batches_tracked, bool use_batch_stats,
                             bool update_running_stats, double momentum, bool cumulative_average, double eps) {
  using namespace lbs;
  const at::Tensor& x = y;  // the checks below name the device and options of y
  TORCH_CHECK(y.is_cuda() && y.scalar_type() == at::kFloat && y.dim() == 2 && y.is_contiguous(),
              "linear_bn_softmax: y must be a contiguous float32 2-D CUDA tensor (linear_no_bias's output)");
  const int64_t m = y.size(0), n = y.size(1);
  TORCH_CHECK(m > 0 && n > 0 && m <= INT_MAX && n <= INT_MAX, "linear_bn_softmax: bad y shape ", txt(y.sizes()));
  TORCH_CHECK(!use_batch_stats || m >= 2, "linear_bn_softmax: batch statistics need at least 2 rows, got ", txt(m));
  check_float_vector(bias, "bias", n, x);
  check_float_vector(gamma, "bn.weight", n, x);
  check_float_vector(beta, "bn.bias", n, x);
  check_float_vector(running_mean, "bn.running_mean", n, x);
  check_float_vector(running_var, "bn.running_var", n, x);
  TORCH_CHECK(running_mean.has_value() == running_var.has_value(),
              "linear_bn_softmax: running_mean and running_var must both be given or both be absent");
  TORCH_CHECK(use_batch_stats || running_mean.has_value(), "linear_bn_softmax: eval mode needs running statistics");
  TORCH_CHECK(!update_running_stats || running_mean.has_value(),
              "linear_bn_softmax: updating running statistics needs running_mean / running_var");
  TORCH_CHECK(scale.device() == x.device() && scale.scalar_type() == at::kFloat && scale.is_contiguous() &&
                  (scale.numel() == 1 || scale.numel() == n),
              "linear_bn_softmax: scale must be a contiguous float32 tensor of 1 or ", n, " values on ", x.device());
  if (num_batches_tracked.has_value()) {
    TORCH_CHECK(use_batch_stats, "linear_bn_softmax: num_batches_tracked is only bumped in training");
    TORCH_CHECK(num_batches_tracked->device() == x.device() && num_batches_tracked->scalar_type() == at::kLong &&
                    num_batches_tracked->numel() == 1,
                "linear_bn_softmax: num_batches_tracked must be an int64 scalar on ", x.device());
  }
  TORCH_CHECK(!(update_running_stats && cumulative_average) || num_batches_tracked.has_value(),
              "linear_bn_softmax: momentum=None needs num_batches_tracked");
  const c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();

  BatchNormParams bn{};
  bn.bias = ptr_or_null(bias);
  bn.gamma = ptr_or_null(gamma);
  bn.beta = ptr_or_null(beta);
  bn.scale = scale.data_ptr<float>();
  bn.scale_stride = scale.numel() == 1 ? 0 : 1;
  bn.running_mean = update_running_stats || !use_batch_stats ? running_mean->data_ptr<float>() : nullptr;
  bn.running_var = update_running_stats || !use_batch_stats ? running_var->data_ptr<float>() : nullptr;
  int64_t* const nbt_to_bump = num_batches_tracked.has_value() ? num_batches_tracked->data_ptr<int64_t>() : nullptr;
  bn.num_batches_tracked = update_running_stats && cumulative_average ? nbt_to_bump : nullptr;
  bn.momentum = momentum;
  bn.cumulative_average = cumulative_average;
  bn.eps = eps;

  at::Tensor affine = at::empty({3, n}, x.options());
  float* const affine_base = affine.data_ptr<float>();
  const ColumnAffineOut out{affine_base, affine_base + n, affine_base + 2 * n};
  const int col_blocks = static_cast<int>((n + kFinalizeThreads - 1) / kFinalizeThreads);
  if (use_batch_stats) {
    const int64_t tiles = (m + kStatsRowsPerTile - 1) / kStatsRowsPerTile;
    TORCH_CHECK(tiles <= INT_MAX && (n + kStatsThreads - 1) / kStatsThreads <= 65535,
                "linear_bn_softmax: problem too large for the statistics grid");
    at::Tensor partials = at::empty({2, tiles, n}, x.options());
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>((n + kStatsThreads - 1) / kStatsThreads));
    float* const tile_mean = partials.data_ptr<float>();
    float* const tile_m2 = tile_mean + tiles * n;
    column_stats_partial_kernel<<<grid, kStatsThreads, 0, stream>>>(y.data_ptr<float>(), m, n, tile_mean, tile_m2,
                                                                    nbt_to_bump);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    bn_train_finalize_kernel<<<col_blocks, kFinalizeThreads, 0, stream>>>(tile_mean, tile_m2, tiles, m, n, bn, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    bn_eval_params_kernel<<<col_blocks, kFinalizeThreads, 0, stream>>>(n, bn, out);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  TORCH_CHECK(m <= INT_MAX, "linear_bn_softmax: too many rows for the row pass");
  if (n % 4 == 0 && n <= kSoftmaxCachedCols) {
    norm_scale_softmax_kernel<true><<<static_cast<unsigned>(m), kSoftmaxThreads, 0, stream>>>(
        y.data_ptr<float>(), n, out.shift, out.mult, out.add);
  } else {
    norm_scale_softmax_kernel<false><<<static_cast<unsigned>(m), kSoftmaxThreads, 0, stream>>>(
        y.data_ptr<float>(), n, out.shift, out.mult, out.add);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
