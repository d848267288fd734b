// Device-code-only translation unit: instantiates every attention kernel without torch headers, so
// `nvcc -c -Xptxas -v` on this file reports registers/spills of the exact kernels the extension
// launches in seconds (the CI test compiles it; the full extension build is the GPU host's job).
#include "attn_common.cuh"
#include "attn_wgmma.cuh"
#include "attn_hopper.cu"
#include "attn_hopper_regp.cu"
#include "attn_decode.cu"
#include "attn_chunked.cu"
#include "attn_hopper_f32.cu"

namespace kforge_attn {
// Every (dtype x variant) the host dispatcher can launch (attention.cu's Path), nothing else.
#define KFORGE_HOPPER(T, NWG, NKB)                                                                             \
  template __global__ void attn_hopper_kernel<T, NWG, NKB>(                                                    \
      const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap, \
      const __grid_constant__ CUtensorMap);
#define KFORGE_HOPPER_REGP(T, CLUSTER, KSPLIT)                                                                \
  template __global__ void attn_hopper_regp_kernel<T, CLUSTER, KSPLIT>(                                             \
      const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap, \
      const __grid_constant__ CUtensorMap);
#define KFORGE_DECODE(T, BN)                                                                                  \
  template __global__ void attn_decode_kernel<T, BN, 4>(const __grid_constant__ AttnParams,                    \
                                                        const __grid_constant__ DecodeParams);                 \
  template __global__ void attn_decode_kernel<T, BN, 8>(const __grid_constant__ AttnParams,                    \
                                                        const __grid_constant__ DecodeParams);
#define KFORGE_ALL_VARIANTS(T)                                                                                \
  KFORGE_HOPPER(T, 2, 2)                                                                                      \
  KFORGE_HOPPER(T, 1, 4)                                                                                      \
  KFORGE_HOPPER_REGP(T, 2, 1)                                                                                 \
  KFORGE_HOPPER_REGP(T, 1, 2)                                                                                 \
  KFORGE_DECODE(T, 16)                                                                                        \
  KFORGE_DECODE(T, 32)                                                                                        \
  template __global__ void attn_decode_combine<T>(const __grid_constant__ AttnParams,                          \
                                                  const __grid_constant__ DecodeParams);                       \
  template __global__ void attn_merge_chunks<T>(const T*, const float*, const MergeOut<T>, int64_t, int, int);
KFORGE_ALL_VARIANTS(__half)
KFORGE_ALL_VARIANTS(__nv_bfloat16)
// float32 (not templated: instantiated by their definitions above): attn_hopper_f32_kernel, attn_f32_fixup.
}  // namespace kforge_attn
