"""Device math of kf_pointwise.cuh that claims to equal an IEEE operation bit for bit, checked over every float."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

CUDA_DIR = Path(__file__).resolve().parents[2] / "src" / "optimize" / "codegen" / "cuda"

CUDA = r"""
#include <cstdint>
#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>
#include "kf_pointwise.cuh"

// Counts kf_div6(a) != a / 6.f over a range of bit patterns (NaN equals NaN): where the quotient is a normal
// float (bad[0], keeping the lowest such input), and where it is subnormal and off by more than one ulp (bad[1]).
__global__ void div6_mismatches(uint64_t base, unsigned long long* bad, unsigned* first) {
  const unsigned bits = unsigned(base + uint64_t(blockIdx.x) * blockDim.x + threadIdx.x);
  const float a = __uint_as_float(bits);
  const float want = a / 6.f, got = kf_div6(a);
  const unsigned w = __float_as_uint(want), g = __float_as_uint(got);
  if (w == g || (want != want && got != got)) return;
  if (fabsf(want) >= 1.17549435e-38f) {
    atomicAdd(bad, 1ull);
    atomicMin(first, bits);
  } else if ((w >> 31) != (g >> 31) || max(w, g) - min(w, g) > 1u) {
    atomicAdd(bad + 1, 1ull);
  }
}

std::vector<int64_t> div6_check() {
  at::Tensor bad = at::zeros({2}, at::TensorOptions().device(at::kCUDA).dtype(at::kLong));
  at::Tensor first = at::full({1}, -1, at::TensorOptions().device(at::kCUDA).dtype(at::kInt));
  const auto stream = c10::cuda::getCurrentCUDAStream().stream();
  const uint64_t per = uint64_t(1) << 30;
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += per)
    div6_mismatches<<<unsigned(per / 256), 256, 0, stream>>>(
        base, reinterpret_cast<unsigned long long*>(bad.data_ptr()), reinterpret_cast<unsigned*>(first.data_ptr()));
  const at::Tensor counts = bad.cpu();
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>(),
          static_cast<int64_t>(static_cast<uint32_t>(first.item<int32_t>()))};
}
"""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_kf_div6_equals_the_ieee_divide_where_the_quotient_is_normal():
    from torch.utils.cpp_extension import load_inline

    ext = load_inline(name="kf_pointwise_exact", cpp_sources=["std::vector<int64_t> div6_check();"],
                      cuda_sources=[CUDA], functions=["div6_check"], extra_include_paths=[str(CUDA_DIR)],
                      extra_cuda_cflags=["-O3", "-std=c++17"], verbose=False)
    normal, subnormal, first = ext.div6_check()
    assert (normal, subnormal) == (0, 0), (
        f"{normal} normal quotients differ from a / 6.f (the first at bits {first:#010x}), "
        f"{subnormal} subnormal ones by more than one ulp")
