// Device-code-only translation unit: instantiates every attention kernel without torch headers, so
// `nvcc -c -Xptxas -v` on this file reports registers/spills of the exact kernels the extension
// launches in seconds (the CI test compiles it; the full extension build is the GPU host's job).
#include "attn_common.cuh"
#include "attn_wgmma.cuh"
#include "attn_general.cu"
#include "attn_hopper.cu"

namespace kforge_attn {
template __global__ void attn_general_kernel<__half, 64>(const __grid_constant__ AttnParams);
template __global__ void attn_general_kernel<__half, 128>(const __grid_constant__ AttnParams);
template __global__ void attn_general_kernel<__nv_bfloat16, 64>(const __grid_constant__ AttnParams);
template __global__ void attn_general_kernel<__nv_bfloat16, 128>(const __grid_constant__ AttnParams);
template __global__ void attn_hopper_kernel<__half, 2, 2, 1>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__half, 2, 2, 2>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__half, 2, 2, 4>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__half, 1, 4, 1>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__half, 1, 4, 2>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__nv_bfloat16, 2, 2, 1>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__nv_bfloat16, 2, 2, 2>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__nv_bfloat16, 2, 2, 4>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__nv_bfloat16, 1, 4, 1>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
template __global__ void attn_hopper_kernel<__nv_bfloat16, 1, 4, 2>(const __grid_constant__ AttnParams, const __grid_constant__ CUtensorMap,
    const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap);
}  // namespace kforge_attn
