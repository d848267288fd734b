// Torch side of the kf_normalize / kf_pool test harness: builds shapes and strided views with kf_host.h and
// calls the entries of norm_pool_harness.cu (which has no torch headers, as generated code).
#include <c10/cuda/CUDAStream.h>
#include "kf_host.h"
#include "kf_pool_params.h"

size_t kfh_norm_workspace(int op, const KfShape& shape, uint32_t mask);
cudaError_t kfh_norm(int op, int dtype, const KfShape& shape, uint32_t mask, void* out, const KfTensorRef* in,
                     const KfScalars& sc, float* stats_out, void* ws, size_t wsb, cudaStream_t stream);
cudaError_t kfh_pool(int kind, int epi, int dtype, const KfPoolParams& p, const void* in, void* out,
                     const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream);
cudaError_t kfh_pool_fixed(const int (&window)[4], int kind, int epi, int dtype, const KfPoolParams& p, const void* in,
                           void* out, const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream);
cudaError_t kfh_pool_cl(const int (&window)[3], int kind, int epi, int dtype, const KfPoolParams& p, const void* in, void* out,
                        const KfTensorRef* extra, const KfScalars& sc, cudaStream_t stream);

static int dtype_code(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kBFloat16: return 2;
    default: TORCH_CHECK(false, "harness: unsupported dtype"); return -1;
  }
}

static KfScalars scalars_of(const std::vector<double>& sc) {
  KfScalars s{};
  TORCH_CHECK(sc.size() <= KF_MAX_SCALARS, "harness: too many scalars");
  for (size_t i = 0; i < sc.size(); ++i) s.v[i] = static_cast<float>(sc[i]);
  return s;
}

int64_t norm_workspace(int64_t op, const std::vector<int64_t>& shape, int64_t mask) {
  return static_cast<int64_t>(kfh_norm_workspace(static_cast<int>(op), kf_shape_of(shape), static_cast<uint32_t>(mask)));
}

// out = normalize(ins) over `mask` of the iteration shape; ins are views broadcastable to it (any strides).
// stats: a float32 [K, 3] tensor to receive {a, b, count}, or an empty tensor for none. ws_short: bytes to
// withhold from the required workspace (tests the launcher's refusal).
at::Tensor norm(int64_t op, const std::vector<at::Tensor>& ins, const std::vector<int64_t>& shape, int64_t mask,
                const std::vector<double>& sc, at::Tensor stats, int64_t ws_short) {
  const KfShape s = kf_shape_of(shape);
  std::vector<KfTensorRef> refs;
  for (const auto& t : ins) refs.push_back(kf_ref(t, s));
  at::Tensor out = at::empty(shape, ins[0].options().memory_format(at::MemoryFormat::Contiguous));
  const size_t need = kfh_norm_workspace(static_cast<int>(op), s, static_cast<uint32_t>(mask));
  const size_t give = need > static_cast<size_t>(ws_short) ? need - static_cast<size_t>(ws_short) : 0;
  at::Tensor ws = kf_workspace(give, ins[0]);
  float* stats_ptr = nullptr;
  if (stats.numel() > 0) {
    TORCH_CHECK(stats.scalar_type() == at::kFloat && stats.is_contiguous(), "harness: stats must be contiguous fp32");
    stats_ptr = stats.data_ptr<float>();
  }
  kf_check_cuda(kfh_norm(static_cast<int>(op), dtype_code(out), s, static_cast<uint32_t>(mask), out.data_ptr(),
                         refs.data(), scalars_of(sc), stats_ptr, give ? ws.data_ptr() : nullptr, give,
                         c10::cuda::getCurrentCUDAStream().stream()),
                "kf_launch_normalize");
  return out;
}

// Pooling of contiguous x [N, C, spatial...]; extra: 0 or 1 epilogue inputs broadcastable to the output
// (pooled * sc[0] + extra); with `prologue`, every tap is tanh(tap + extra) first (extra then per channel).
// window: empty for kf_launch_pool, {-1} for kf_launch_pool_cl (x channels-last) for any window, {-1, KD, KH, KW}
// for it unrolled for that one (one of norm_pool_harness.cu's KFH_CL_WINDOWS), else the (KD, KH, KW, SH)
// kf_launch_pool_fixed is instantiated for (one of norm_pool_harness.cu's KFH_FIXED_WINDOWS).
static at::Tensor pool_with(bool prologue, const std::vector<int64_t>& window, int64_t kind, const at::Tensor& x,
                            const std::vector<at::Tensor>& extra, const std::vector<int64_t>& out_size,
                            const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& pad, const std::vector<int64_t>& dilation,
                            bool count_include_pad, int64_t divisor_override, bool adaptive, double scale) {
  const bool channels_last = !window.empty() && window[0] == -1;  // kf_launch_pool_cl
  TORCH_CHECK(channels_last ? x.is_contiguous(x.dim() == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast)
                            : x.is_contiguous(),
              "harness: pool input must be contiguous (channels-last for the _cl launcher)");
  const int nd = static_cast<int>(x.dim()) - 2;
  KfPoolParams p{};
  p.nd = nd;
  p.N = x.size(0);
  p.C = x.size(1);
  std::vector<int64_t> oshape{x.size(0), x.size(1)};
  for (int d = 0; d < nd; ++d) {
    p.in_size[d] = x.size(2 + d);
    p.out_size[d] = out_size[d];
    p.kernel[d] = static_cast<int>(kernel[d]);
    p.stride[d] = static_cast<int>(stride[d]);
    p.pad[d] = static_cast<int>(pad[d]);
    p.dilation[d] = static_cast<int>(dilation[d]);
    oshape.push_back(out_size[d]);
  }
  p.count_include_pad = count_include_pad;
  p.divisor_override = static_cast<int>(divisor_override);
  p.adaptive = adaptive;
  at::Tensor out = at::empty(oshape, x.options().memory_format(at::MemoryFormat::Contiguous));
  const KfShape os = kf_shape_of(oshape);
  std::vector<KfTensorRef> refs;
  for (const auto& t : extra) refs.push_back(kf_ref(t, os));
  TORCH_CHECK(!prologue || extra.size() == 1, "harness: the prologue reads one operand");
  const int epi = prologue ? 2 : extra.empty() ? 0 : 1;
  const KfTensorRef* refp = refs.empty() ? nullptr : refs.data();
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  if (channels_last) {
    TORCH_CHECK(window.size() == 1 || window.size() == 4, "harness: a channels-last window is {-1} or {-1, KD, KH, KW}");
    const int w[3] = {window.size() == 4 ? int(window[1]) : 0, window.size() == 4 ? int(window[2]) : 0,
                      window.size() == 4 ? int(window[3]) : 0};
    kf_check_cuda(kfh_pool_cl(w, static_cast<int>(kind), epi, dtype_code(x), p, x.data_ptr(), out.data_ptr(), refp,
                              scalars_of({scale}), stream),
                  "kf_launch_pool_cl");
  } else if (window.empty()) {
    kf_check_cuda(kfh_pool(static_cast<int>(kind), epi, dtype_code(x), p, x.data_ptr(), out.data_ptr(), refp,
                           scalars_of({scale}), stream),
                  "kf_launch_pool");
  } else {
    TORCH_CHECK(window.size() == 4, "harness: window is (KD, KH, KW, SH)");
    const int w[4] = {int(window[0]), int(window[1]), int(window[2]), int(window[3])};
    kf_check_cuda(kfh_pool_fixed(w, static_cast<int>(kind), epi, dtype_code(x), p, x.data_ptr(), out.data_ptr(), refp,
                                 scalars_of({scale}), stream),
                  "kf_launch_pool_fixed");
  }
  return out;
}

at::Tensor pool(int64_t kind, const at::Tensor& x, const std::vector<at::Tensor>& extra,
                const std::vector<int64_t>& out_size, const std::vector<int64_t>& kernel,
                const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                const std::vector<int64_t>& dilation, bool count_include_pad, int64_t divisor_override,
                bool adaptive, double scale) {
  return pool_with(false, {}, kind, x, extra, out_size, kernel, stride, pad, dilation, count_include_pad, divisor_override,
                   adaptive, scale);
}

at::Tensor pool_fixed(const std::vector<int64_t>& window, int64_t kind, const at::Tensor& x,
                      const std::vector<at::Tensor>& extra, const std::vector<int64_t>& out_size,
                      const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& pad, const std::vector<int64_t>& dilation, bool count_include_pad,
                      int64_t divisor_override, bool adaptive, double scale) {
  return pool_with(false, window, kind, x, extra, out_size, kernel, stride, pad, dilation, count_include_pad,
                   divisor_override, adaptive, scale);
}

// pool_fixed (window non-empty) or pool (empty) of tanh(x + extra[0]), then * scale + extra[0].
at::Tensor pool_prologue(const std::vector<int64_t>& window, int64_t kind, const at::Tensor& x,
                         const std::vector<at::Tensor>& extra, const std::vector<int64_t>& out_size,
                         const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                         const std::vector<int64_t>& pad, const std::vector<int64_t>& dilation, bool count_include_pad,
                         int64_t divisor_override, bool adaptive, double scale) {
  return pool_with(true, window, kind, x, extra, out_size, kernel, stride, pad, dilation, count_include_pad,
                   divisor_override, adaptive, scale);
}
