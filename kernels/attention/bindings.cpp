// Declaration seen by the extension's C++ translation unit; load_inline(functions=[...]) binds it.
#include <torch/extension.h>

// out = softmax(q k^T * scale, causal mask if is_causal) v with the kernel `path` (chosen by the caller, runtime.py's
// _kf_attn_kernel_path): 2 wgmma kernel for S_k <= 512, 3 wgmma kernel for S_k <= 1024 (P in shared memory),
// 8 wgmma kernel with P in registers for S_k <= 512 (2-CTA K/V multicast), 9 the same with the keys split over
// 2 CTAs for S_k <= 1024 (8 and 9 need a positive scale), 10 the split-key decode kernel (any S_k). All need an
// sm_90 GPU.
at::Tensor kforge_attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal,
                                    double scale, int64_t path);

// The same for key rows longer than one kernel holds: the keys in chunks of at most chunk_keys (<= 1024), each run
// by wgmma kernel full_path (rows that see the whole chunk) or diag_path (the causal diagonal), merged by the rows'
// log-sum-exp. The caller chooses the chunking and both kernels (runtime.py's _kf_attn_chunk_plan).
at::Tensor kforge_attention_forward_chunked(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal,
                                            double scale, int64_t chunk_keys, int64_t full_path, int64_t diag_path);
