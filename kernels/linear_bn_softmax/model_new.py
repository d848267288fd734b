"""ModelNew: softmax(scale * BatchNorm1d(Linear(x)), dim=1) with custom CUDA kernels.

Drop-in for the reference Model(in_features, out_features, bn_eps, bn_momentum, scale_shape): same
submodules (gemm, bn, scale, softmax), same state_dict keys, same forward(x).

CUDA path (fp32 CUDA input, no autograd recording):
  Y = x W^T    cuBLAS on tensor cores. torch.backends.cuda.matmul.allow_tf32 off (PyTorch's default):
               3xTF32 - x and W split into tf32 big + small parts by our kernel, Y = xs Wb^T + xb Ws^T
               + xb Wb^T in fp32, the big*big product accumulated in K-chunks - error at fp32 level.
               allow_tf32 on (or float32 matmul precision 'high'/'medium'): one TF32 GEMM, as PyTorch
               itself does then.
  statistics   training (or no running stats): per-column batch mean / biased variance from row-tile
               partials merged with Chan's formula in a fixed order (deterministic); running_mean,
               running_var (unbiased) and num_batches_tracked updated as nn.BatchNorm1d does, momentum=None
               included. Eval: the running statistics. Either way the per-column affine is rebuilt from
               the live parameters and buffers on every call - nothing is folded at __init__.
  row pass     z = (y - shift) * mult + add, softmax over the row, in place on Y.
Anything else - CPU tensors, other dtypes, autograd recording, autocast, pre-Ampere GPUs, layouts the
kernels do not cover, batch 1 in training (PyTorch raises its own error) - runs the original PyTorch
ops, so the answer is never wrong.

The weight's 3xTF32 split (3x the weight's size: 805 MB at 8192 x 8192) is rebuilt on every call by
default: writes through `weight.data` (`weight.data.copy_(w)`) bump no version counter, so no cache can see
them. `model.cache_weight_split = True` keeps the split between calls, keyed on the Parameter object, its
storage and its version counter (bumped by optimiser steps, load_state_dict, copy_ on the Parameter): use it
when the weight is never written through `.data`.
"""

import torch
import torch.nn as nn

"@@KFORGE_PYTHON:runtime.py@@"

# Names benches and tests of this file use.
_CUDA_SOURCE = _KF_LBS_CUDA_SOURCE
_CPP_SOURCE = _KF_LBS_CPP_SOURCE
_cublas_link_flags = _kf_lbs_cublas_link_flags
_extension = _kf_lbs_extension
_k_chunk_for = _kf_lbs_k_chunk_for


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bn_eps=1e-5, bn_momentum=0.1, scale_shape=(1,)):
        super().__init__()
        # Same construction order as the reference, so a seeded init gives identical parameters.
        self.gemm = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.scale = nn.Parameter(torch.ones(scale_shape))
        self.softmax = nn.Softmax(dim=1)
        self.cache_weight_split = False
        # 3xTF32: K-chunk length (see split_tf32.cu and _k_chunk_for); None = chosen from K,
        # 0 = one GEMM over all of K.
        self.fp32_k_chunk = None
        self._weight_split_cache = _KfLbsWeightSplit()

    def forward(self, x):
        # The GEMM is launched as soon as the checks it needs have passed; the remaining checks and the
        # BatchNorm bookkeeping then run on the host while it executes (the GPU is not left idle for
        # them). Should a later check fail, its result is dropped and the original ops run: never wrong.
        gemm = self.gemm
        if type(gemm) is nn.Linear and _kf_lbs_gemm_applies(x, gemm.weight, self.parameters()):
            self._weight_split_cache.enabled = self.cache_weight_split
            y = _kf_lbs_launch_gemm(x, gemm.weight, self._weight_split_cache, self.fp32_k_chunk)
            if isinstance(self.softmax, nn.Softmax) and _kf_lbs_finish_applies(
                x, gemm.weight, gemm.bias, self.bn, self.scale, self.softmax.dim
            ):
                return _kf_lbs_finish(y, gemm.bias, self.bn, self.scale)
        return self._forward_reference(x)

    def _forward_reference(self, x):
        x = self.gemm(x)
        x = self.bn(x)
        x = self.scale * x
        x = self.softmax(x)
        return x

    def _weight_split(self, ext, k_chunk):
        """The cached 3xTF32 split of gemm.weight (None: not cached, split on the call)."""
        self._weight_split_cache.enabled = self.cache_weight_split
        return self._weight_split_cache.get(ext, self.gemm.weight, k_chunk)
