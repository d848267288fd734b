"""Builds (once per process) the kf_normalize / kf_pool harness extension with load_inline.

norm_pool_harness.cu (no torch headers; also compiled alone by test/python/test_codegen_norm_pool_nvcc.py)
holds the sample functors and launcher instantiations; norm_pool_binding.cpp the torch side (kf_host.h).
"""

from __future__ import annotations

import functools
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
CUDA_DIR = REPO / "src" / "optimize" / "codegen" / "cuda"

# Op and pool-kind codes of norm_pool_harness.cu.
OP_SOFTMAX, OP_LOG_SOFTMAX, OP_AFFINE, OP_RMS, OP_AFFINE_F32_PARAMS, OP_AFFINE_CL, OP_SOFTMAX_CL, OP_AFFINE_STATS = range(8)
OP_WIDE, OP_WIDE_CL = 11, 12  # eight inputs (WidePro / WideApply), the plain and the channels-last launcher
OP_LOG_SOFTMAX_LONG, OP_AFFINE_LONG = 13, 14  # the long held rows (16K-32K) instantiated
POOL_MAX, POOL_AVG = 0, 1
# (KD, KH, KW, SH) windows norm_pool_harness.cu instantiates kf_launch_pool_fixed for (KFH_FIXED_WINDOWS).
FIXED_WINDOWS = [(1, 3, 3, 2), (1, 2, 2, 2), (1, 1, 4, 1), (3, 3, 3, 2), (1, 3, 2, 2), (1, 3, 3, 1)]
# (KD, KH, KW) windows it instantiates kf_launch_pool_cl unrolled for (KFH_CL_WINDOWS, less the any-window 0, 0, 0).
CL_WINDOWS = [(1, 2, 2), (1, 3, 3), (2, 2, 2), (1, 4, 4)]


@functools.lru_cache(maxsize=1)
def load():
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name="kf_norm_pool_harness",
        cpp_sources=[(HERE / "norm_pool_binding.cpp").read_text()],
        cuda_sources=[(HERE / "norm_pool_harness.cu").read_text()],
        functions=["norm", "norm_workspace", "pool", "pool_fixed", "pool_prologue"],
        extra_include_paths=[str(CUDA_DIR)],
        extra_cflags=["-O2", "-std=c++17"],
        extra_cuda_cflags=["-O3", "-std=c++17"],
        verbose=False,
    )
