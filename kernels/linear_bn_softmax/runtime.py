# The linear_bn_softmax recipe's Python side: softmax(scale * BatchNorm1d(x W^T + b), dim=1) on the recipe's
# kernels. `kforge emit` inlines this file into generated/linear_bn_softmax/model_new.py and `kforge optimize`
# into every ModelNew with a Linear -> BatchNorm1d -> scale -> softmax region, so both run the same host
# logic: the applicability checks, the weight-split cache, the BatchNorm bookkeeping and the extension call.
# Names carry the _kf_lbs_ prefix: the file lands in a module beside the reference's own code.
import glob
import math
import os
import sys

import torch
import torch.nn as nn

_KF_LBS_CUDA_SOURCE = "@@KFORGE_SOURCE:host.cu@@"
_KF_LBS_CPP_SOURCE = "@@KFORGE_SOURCE:bindings.cpp@@"

_kf_lbs_module = None


def _kf_lbs_cublas_link_flags():
    """Linker flags for cuBLAS, matching the soname that torch itself loaded where possible.

    pip-installed CUDA (nvidia-cublas wheels) ships only the versioned library (libcublas.so.13), so
    `-lcublas` alone can fail to link; a toolkit install has the unversioned name in CUDA_HOME.
    """
    from torch.utils.cpp_extension import CUDA_HOME

    major = (torch.version.cuda or "").split(".")[0]
    for base in sys.path:
        for lib in sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", f"libcublas.so.{major}*"))):
            return [f"-L{os.path.dirname(lib)}", f"-l:{os.path.basename(lib)}"]
    if CUDA_HOME:
        for sub in ("lib64", "lib", os.path.join("targets", "x86_64-linux", "lib")):
            if os.path.exists(os.path.join(CUDA_HOME, sub, "libcublas.so")):
                return [f"-L{os.path.join(CUDA_HOME, sub)}", "-lcublas"]
    # Last resort: leave the symbols undefined; torch's CUDA build loads libcublas globally at import.
    return []


def _kf_lbs_extension():
    """Builds (once per process, cached on disk by torch) the CUDA extension. A failed build raises."""
    global _kf_lbs_module
    if _kf_lbs_module is None:
        from torch.utils.cpp_extension import load_inline

        _kf_lbs_module = load_inline(
            name="kforge_linear_bn_softmax",
            cpp_sources=[_KF_LBS_CPP_SOURCE],
            cuda_sources=[_KF_LBS_CUDA_SOURCE],
            functions=["linear_no_bias", "bn_scale_softmax_", "split_weight_tf32x3"],
            extra_cflags=["-O3"],
            extra_cuda_cflags=["-O3"],
            extra_ldflags=_kf_lbs_cublas_link_flags(),
            verbose=False,
        )
    return _kf_lbs_module


def _kf_lbs_autocast_enabled():
    try:
        return torch.is_autocast_enabled("cuda")
    except TypeError:  # PyTorch < 2.4: no device argument, the flag is CUDA's
        return torch.is_autocast_enabled()


_KF_LBS_INT32_MAX = 2**31 - 1
_KF_LBS_CAPABILITY = {}


def _kf_lbs_device_capability(device):
    """torch.cuda.get_device_capability, memoised: it is asked on every call."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _KF_LBS_CAPABILITY:
        _KF_LBS_CAPABILITY[index] = torch.cuda.get_device_capability(index)
    return _KF_LBS_CAPABILITY[index]


def _kf_lbs_k_chunk_for(k):
    """K-chunk length of the 3xTF32 layout (split_tf32.cu): one GEMM per chunk of K.

    Measured on an H100 (bench/linear_bn/NOTES.md): the tensor cores' accumulator truncates, so the
    GEMM's error grows linearly with the accumulation length (systematically, shrinking |y|), while a
    CUDA-core SGEMM's grows like sqrt(K). Chunks of ~23*sqrt(K) keep our GEMM error within ~3x of
    SGEMM's, which after BatchNorm and softmax put the output at 0.5-1x PyTorch fp32's error at
    K = 8192 (chunk 2048). Powers of two, 256 to 2048: shorter chunks cost GEMM efficiency.
    """
    chunk = 256
    while chunk * 2 <= min(2048, 23 * math.sqrt(k)):
        chunk *= 2
    return chunk if chunk < k else 0


class _KfLbsWeightSplit:
    """The 3xTF32 split of one Linear weight (3x the weight's size: 805 MB at 8192 x 8192), kept between calls
    while the weight is unchanged: keyed on the Parameter object, its version counter (bumped by every
    in-place update: optimiser steps, load_state_dict, copy_), its storage address (`weight.data = ...`),
    the K-chunk length and the device. Off by default: writes through `weight.data` (`weight.data.copy_(w)`)
    bump no version counter and would leave a stale split, so the safe default rebuilds the split on every call
    (a pass over the weight). Turn it on (`enabled = True`, the ModelNew's `cache_weight_split = True`) when
    the weight is only changed through in-place ops on the Parameter, load_state_dict or reassignment."""

    def __init__(self):
        self.enabled = False
        self.entry = None  # (weight Parameter, key, (N, 3K) split)

    def get(self, ext, w, k_chunk):
        if not self.enabled:
            self.entry = None
            return None  # the extension splits the weight into scratch on this call
        try:
            version = w._version
        except RuntimeError:  # inference tensors carry no version counter: never cache them
            return None
        key = (version, w.data_ptr(), k_chunk, w.device)
        entry = self.entry
        if entry is not None and entry[0] is w and entry[1] == key:
            return entry[2]
        self.entry = None  # free the stale split before allocating the new one
        split = ext.split_weight_tf32x3(w.detach(), k_chunk)
        self.entry = (w, key, split)
        return split


def _kf_lbs_split_cache(owner, region):
    """The weight-split cache of one region of `owner`, kept in its __dict__ (never in its state_dict); on only
    while `owner.cache_weight_split` is set (see _KfLbsWeightSplit for when that is safe)."""
    caches = owner.__dict__.setdefault("_kf_lbs_weight_splits", {})
    cache = caches.get(region)
    if cache is None:
        cache = caches[region] = _KfLbsWeightSplit()
    cache.enabled = bool(owner.__dict__.get("cache_weight_split", False))
    return cache


def _kf_lbs_gemm_applies(x, weight, others):
    """What the GEMM itself needs: an fp32 2-D CUDA x, an fp32 [N, K] weight beside it, no autocast, int
    sizes, and nothing for autograd to record (x, the weight and `others`, the chain's other tensors)."""
    if not (isinstance(x, torch.Tensor) and x.is_cuda and x.dtype == torch.float32 and x.dim() == 2):
        return False
    if not isinstance(weight, torch.Tensor) or _kf_lbs_autocast_enabled():
        return False
    if not (weight.is_cuda and weight.dtype == torch.float32 and weight.dim() == 2 and weight.shape[1] == x.shape[1]):
        return False
    if weight.device != x.device or min(x.shape[0], x.shape[1], weight.shape[0]) == 0:
        return False
    if max(x.shape[0], x.shape[1], weight.shape[0]) > _KF_LBS_INT32_MAX or (
        not torch.backends.cuda.matmul.allow_tf32 and 3 * x.shape[1] > _KF_LBS_INT32_MAX
    ):
        return False  # cuBLAS takes int sizes
    # Autograd recording (the default outside no_grad when parameters require grad): the original ops
    # build the graph. Checked here, since it is the common reason to fall back.
    if torch.is_grad_enabled() and (
        x.requires_grad
        or weight.requires_grad
        or any(isinstance(t, torch.Tensor) and t.requires_grad for t in others)
    ):
        return False
    return _kf_lbs_device_capability(x.device)[0] >= 8  # TF32 tensor cores


def _kf_lbs_launch_gemm(x, weight, cache, k_chunk=None):
    """Launches Y = x W^T on the tensor cores (3xTF32 unless TF32 is allowed) and returns Y. k_chunk: the
    3xTF32 K-chunk length (None: chosen from K; 0: one GEMM over all of K)."""
    ext = _kf_lbs_extension()
    w = weight.detach()
    if not w.is_contiguous():
        w = w.contiguous()
    fp32_accurate = not torch.backends.cuda.matmul.allow_tf32
    k_chunk = _kf_lbs_k_chunk_for(x.shape[1]) if k_chunk is None else int(k_chunk)
    # The cached split is of the Parameter itself; a non-contiguous weight is split on every call.
    weight_split = cache.get(ext, weight, k_chunk) if fp32_accurate and weight.is_contiguous() else None
    return ext.linear_no_bias(x.contiguous(), w, weight_split, fp32_accurate, k_chunk)


def _kf_lbs_uses_batch_stats(bn):
    """Whether this call normalises with batch statistics (nn.BatchNorm1d's `bn_training`)."""
    return bn.training or (bn.running_mean is None and bn.running_var is None)


def _kf_lbs_scale_supported(scale, n):
    if not isinstance(scale, torch.Tensor):
        return isinstance(scale, (int, float)) and not isinstance(scale, bool)
    if scale.numel() == 1:
        return scale.dim() <= 2
    # One value per output feature, broadcast along rows: (N,) or (1, N).
    return scale.shape[-1] == n and scale.numel() == n and scale.dim() <= 2


def _kf_lbs_finish_applies(x, weight, bias, bn, scale, softmax_dim):
    """The rest of the recipe's conditions, checked while the GEMM runs (x and the weight passed
    _kf_lbs_gemm_applies already: device, dtype, shapes, sizes)."""
    if not isinstance(bn, nn.BatchNorm1d) or softmax_dim not in (1, -1):
        return False
    tensors = [scale] if isinstance(scale, torch.Tensor) else []
    tensors += [t for t in (bias, bn.weight, bn.bias, bn.running_mean, bn.running_var) if t is not None]
    if any(t.device != x.device or t.dtype != torch.float32 for t in tensors):
        return False
    n = weight.shape[0]
    if bn.num_features != n or (bias is not None and bias.shape != (n,)):
        return False
    if (bn.running_mean is None) != (bn.running_var is None):
        return False
    if _kf_lbs_uses_batch_stats(bn) and x.shape[0] < 2:
        return False  # PyTorch's own error for batch 1 comes from the original ops
    return _kf_lbs_scale_supported(scale, n)


def _kf_lbs_finish(y, bias, bn, scale):
    """softmax(scale * BatchNorm1d(y + bias), dim=1) in place on y, with nn.BatchNorm1d's bookkeeping."""
    ext = _kf_lbs_extension()
    use_batch_stats = _kf_lbs_uses_batch_stats(bn)
    update_running_stats = bn.training and bn.track_running_stats and bn.running_mean is not None

    # As nn.BatchNorm1d.forward: num_batches_tracked is bumped (here by the statistics kernel, on
    # the device) whenever training with tracked stats, before momentum=None's 1/count is read.
    momentum, cumulative = (0.0 if bn.momentum is None else float(bn.momentum)), False
    bump_counter = bn.training and bn.track_running_stats and bn.num_batches_tracked is not None
    if bump_counter:
        cumulative = bn.momentum is None
    if not update_running_stats:
        cumulative = False
    if isinstance(scale, torch.Tensor):
        scale = scale.detach().reshape(-1).contiguous()
    else:
        scale = torch.full((1,), float(scale), device=y.device, dtype=torch.float32)

    # Buffers the kernels read (eval) or update in place (training); None where PyTorch passes None.
    stats_in_use = (not use_batch_stats) or update_running_stats
    running_mean = bn.running_mean if stats_in_use else None
    running_var = bn.running_var if stats_in_use else None

    def vec(t):
        return None if t is None else t.detach()

    return ext.bn_scale_softmax_(
        y,
        vec(bias),
        vec(bn.weight),
        vec(bn.bias),
        scale,
        running_mean,
        running_var,
        bn.num_batches_tracked if bump_counter else None,
        use_batch_stats,
        update_running_stats,
        momentum,
        cumulative,
        float(bn.eps),
    )
