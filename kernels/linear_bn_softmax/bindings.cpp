// Declarations for load_inline's generated pybind11 module; the definitions live in host.cu.
#include <torch/extension.h>

at::Tensor split_weight_tf32x3(const at::Tensor& weight, int64_t chunk);

at::Tensor linear_no_bias(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& weight_split,
                          bool fp32_accurate, int64_t k_chunk);

at::Tensor bn_scale_softmax_(const at::Tensor& y, const c10::optional<at::Tensor>& bias,
                             const c10::optional<at::Tensor>& gamma, const c10::optional<at::Tensor>& beta,
                             const at::Tensor& scale, const c10::optional<at::Tensor>& running_mean,
                             const c10::optional<at::Tensor>& running_var,
                             const c10::optional<at::Tensor>& num_batches_tracked, bool use_batch_stats,
                             bool update_running_stats, double momentum, bool cumulative_average, double eps);
