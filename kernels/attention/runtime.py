# The attention recipe's Python side: building the extension, the dispatch decision (whether a kforge kernel
# covers a call, and which one), and the call. `kforge emit` inlines this file into generated/attention/model_new.py
# and `kforge optimize` into every ModelNew with an attention region, so both run the same host logic.
# Names carry the _kf_attn_ prefix: the file lands in a module beside the reference's own code.
#
# The whole decision is made here (_kf_attn_dispatch: _kf_attn_fallback_reason, then _kf_attn_kernel_path); the
# extension launches the kernel it is given and only checks that the kernel can take the inputs. Python, not C++:
# the decision must be answerable where the extension is not built (CPU hosts, the guard of an optimized model
# before any build), every call pays for it in host time, and the checks read tensor metadata Python already has.
import math

import torch

_KF_ATTN_CUDA_SOURCE = "@@KFORGE_SOURCE:attention.cu@@"
_KF_ATTN_CPP_SOURCE = "@@KFORGE_SOURCE:bindings.cpp@@"

# Up to this head dim PyTorch's flash/cuDNN attention (FlashAttention-3 class on H100) is faster than
# our kernels; above it PyTorch falls back to its memory-efficient kernel and ours win.
_KF_ATTN_PYTORCH_MAX_FAST_HEAD_DIM = 256
_KF_ATTN_MAX_HEAD_DIM = 1024
# The most keys one wgmma kernel holds per row (P of the whole row stays on chip). Longer rows run in key chunks
# of at most this many keys, merged by their rows' log-sum-exp (_KF_ATTN_PATH_CHUNKED).
_KF_ATTN_WGMMA_MAX_KEYS = 1024
# The register-P kernels hold P of at most this many keys per CTA (512: two 256-key blocks in registers).
_KF_ATTN_REGP_MAX_KEYS = 512
# Up to this many query rows per head the split-key decode kernel runs, at any key length: the other kernels
# work on 64-128-row query tiles, and with fewer rows most of each tile's MMAs and loads would be padding.
_KF_ATTN_DECODE_MAX_QUERIES = 16
# float32 runs on the fp32 kernel (fp16 hi/lo splits on the tensor cores) for key rows up to this long; longer rows
# and decode-sized query counts stay PyTorch's.
_KF_ATTN_F32_MAX_KEYS = 512

# Kernel paths: the extension's `path` argument (`Path` in attention.cu; 1 and 4-7 were withdrawn kernels and
# are not reused). _KF_ATTN_PATH_AUTO is not a kernel: _kf_attn_forward then asks _kf_attn_kernel_path.
_KF_ATTN_PATH_AUTO = 0
_KF_ATTN_PATH_WGMMA_512 = 2  # wgmma, P in shared memory, 2 consumer warpgroups: S_k <= 512
_KF_ATTN_PATH_WGMMA_1024 = 3  # wgmma, P in shared memory, 1 consumer warpgroup: S_k <= 1024
_KF_ATTN_PATH_WGMMA_512_REGP_MC = 8  # wgmma, P in registers, 2-CTA clusters multicasting K/V: S_k <= 512
_KF_ATTN_PATH_WGMMA_1024_REGP_SPLIT = 9  # wgmma, P in registers, the keys split over a 2-CTA cluster: S_k <= 1024
_KF_ATTN_PATH_DECODE = 10  # mma.sync, S_q <= 16 per head, any S_k: the keys split over CTAs, partials combined
# Not one kernel: S_k > 1024 in key chunks, each run by a wgmma kernel (_kf_attn_chunk_plan), merged by the rows'
# log-sum-exp (the extension's kforge_attention_forward_chunked).
_KF_ATTN_PATH_CHUNKED = 11
_KF_ATTN_PATH_F32_SPLIT = 12  # float32: wgmma on fp16 hi/lo splits, P in shared memory: S_k <= 512
# float(kLog2e) of the kernels, as a double: the kernels work with scale_log2 = fp32(scale * _KF_ATTN_LOG2E_F32).
_KF_ATTN_LOG2E_F32 = 1.4426950216293335

_kf_attn_module = None


def _kf_attn_extension():
    """Builds the CUDA extension once per process (torch caches the build on disk). A failed build raises."""
    global _kf_attn_module
    if _kf_attn_module is None:
        from torch.utils.cpp_extension import load_inline

        _kf_attn_module = load_inline(
            name="kforge_attention_v1",
            cpp_sources=[_KF_ATTN_CPP_SOURCE],
            cuda_sources=[_KF_ATTN_CUDA_SOURCE],
            functions=["kforge_attention_forward", "kforge_attention_forward_chunked"],
            extra_cflags=["-O3"],
            extra_cuda_cflags=["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"],
            verbose=False,
        )
    return _kf_attn_module


_KF_ATTN_CAPABILITY = {}


def _kf_attn_is_sm90(device: torch.device) -> bool:
    """Memoised per device: asked on every call, and get_device_capability costs microseconds."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _KF_ATTN_CAPABILITY:
        _KF_ATTN_CAPABILITY[index] = torch.cuda.get_device_capability(index)
    return _KF_ATTN_CAPABILITY[index] == (9, 0)


def _kf_attn_layout_ok(t: torch.Tensor) -> bool:
    """Contiguous head dim and 16-byte rows (the kernels' TMA/cp.async loads); size-1 dims' strides never
    matter. One stride() tuple per tensor: per-dimension t.stride(d) calls make this the costliest check."""
    strides = t.stride()
    if strides[-1] != 1 or t.data_ptr() % 16 != 0:
        return False
    return all(st % 8 == 0 or n == 1 for st, n in zip(strides[:-1], t.shape[:-1]))


def _kf_attn_fallback_reason(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, enable_gqa=False):
    """Why PyTorch must handle this call (a short phrase), or None when a kforge kernel can (which one:
    _kf_attn_kernel_path). The first half of _kf_attn_dispatch, also called alone by optimized models' guards.

    Cheapest test first: most calls with head dims <= 256 go to PyTorch whatever else holds, and this
    function's own time is host overhead added to every call (on small problems it shows in the ratio to calling
    SDPA directly: bench/attention/NOTES.md)."""
    tensors = (query, key, value)
    if not all(isinstance(t, torch.Tensor) and t.dim() > 0 for t in tensors):
        return "non-tensor input"
    if max(query.shape[-1], value.shape[-1]) <= _KF_ATTN_PYTORCH_MAX_FAST_HEAD_DIM:
        return "small head dim: PyTorch's flash/cuDNN kernels are faster"
    if attn_mask is not None:
        return "attn_mask"
    if dropout_p != 0.0:
        return "dropout"
    if not (query.is_cuda and key.is_cuda and value.is_cuda and query.device == key.device == value.device):
        return "not all on one CUDA device"
    if not query.dtype == key.dtype == value.dtype:
        return "mixed dtypes"
    if query.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return f"dtype {query.dtype}"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return "autograd"
    if not (query.dim() == key.dim() == value.dim() and query.dim() in (3, 4)):
        return "rank"
    qs, ks, vs = query.shape, key.shape, value.shape
    if not qs[:-3] == ks[:-3] == vs[:-3] or ks[-3] != vs[-3]:
        return "batch/head broadcasting"
    if qs[-3] != ks[-3] and not (enable_gqa and ks[-3] > 0 and qs[-3] % ks[-3] == 0):
        return "batch/head broadcasting"  # without enable_gqa (or with heads that do not divide) PyTorch raises
    if ks[-1] != qs[-1] or vs[-2] != ks[-2]:
        return "shape mismatch"  # PyTorch raises its own error
    e, ev = qs[-1], vs[-1]
    if e % 8 or ev % 8 or not (8 <= e <= _KF_ATTN_MAX_HEAD_DIM and 8 <= ev <= _KF_ATTN_MAX_HEAD_DIM):
        return "head dim"
    if qs[-2] == 0 or ks[-2] == 0 or query.numel() == 0:
        return "empty"
    if len(qs) == 4 and (qs[0] > 65535 or qs[1] > 65535):
        return "grid limits"
    if query.dtype == torch.float32:
        if ks[-2] > _KF_ATTN_F32_MAX_KEYS:
            return f"float32 with more than {_KF_ATTN_F32_MAX_KEYS} keys"
        if qs[-2] <= _KF_ATTN_DECODE_MAX_QUERIES:
            return f"float32 with at most {_KF_ATTN_DECODE_MAX_QUERIES} query rows"
    if not (_kf_attn_layout_ok(query) and _kf_attn_layout_ok(key) and _kf_attn_layout_ok(value)):
        return "layout"
    if not _kf_attn_is_sm90(query.device):
        return "not an sm_90 GPU"
    return None


def _kf_attn_ceil_div(a, b):
    return -(-a // b)


def _kf_attn_chunk_keys(key_len):
    """Keys per chunk of a row longer than one kernel holds: as few chunks as hold it, of equal length rounded up to
    whole 64-key V tiles (the last chunk shorter). With more than 1024 keys every chunk has more than 512."""
    chunks = _kf_attn_ceil_div(key_len, _KF_ATTN_WGMMA_MAX_KEYS)
    return _kf_attn_ceil_div(_kf_attn_ceil_div(key_len, chunks), 64) * 64


def _kf_attn_chunk_plan(key_len, is_causal, scale):
    """How a long key row runs: (keys per chunk, kernel for a chunk its rows see whole, kernel for a chunk on the
    causal diagonal), each kernel the one _kf_attn_kernel_path picks for a chunk's length. Chunks have more than 512
    keys, so these are the split register-P kernel or (for non-positive scales) the one-warpgroup shared-memory-P
    kernel: kernels that report their rows' log-sum-exp, which the merge needs (the multicast register-P kernel
    does not)."""
    chunk = _kf_attn_chunk_keys(key_len)
    return chunk, _kf_attn_kernel_path(chunk, False, scale), _kf_attn_kernel_path(chunk, True, scale)


def _kf_attn_kernel_path(key_len, is_causal, scale, query_len=None, dtype=None):
    """Which kernel runs a call the recipe takes (S_k keys, S_q queries per head, scale already resolved): the
    fastest measured. Up to 16 query rows: the decode kernel, at any key length and scale. Above 1024 keys: key
    chunks (_KF_ATTN_PATH_CHUNKED), each on the kernel this function picks for the chunk.

    The register-P kernels take each row's max of the unscaled S, so they need a scale that is positive after
    rounding to fp32 (x rounds to a nonzero fp32 exactly when x > 2^-150); other scales go to the kernels with P
    in shared memory. float32 has one kernel (the 16-bit kernels' arithmetic on hi/lo splits), which
    _kf_attn_fallback_reason lets through only within its limits."""
    if dtype == torch.float32:
        return _KF_ATTN_PATH_F32_SPLIT
    if query_len is not None and query_len <= _KF_ATTN_DECODE_MAX_QUERIES:
        return _KF_ATTN_PATH_DECODE
    if key_len > _KF_ATTN_WGMMA_MAX_KEYS:
        return _KF_ATTN_PATH_CHUNKED
    regp = scale * _KF_ATTN_LOG2E_F32 > 2.0**-150
    if regp and key_len <= _KF_ATTN_REGP_MAX_KEYS:
        return _KF_ATTN_PATH_WGMMA_512_REGP_MC
    if regp and key_len <= 2 * _KF_ATTN_REGP_MAX_KEYS:
        return _KF_ATTN_PATH_WGMMA_1024_REGP_SPLIT
    if key_len <= 512:  # HopperLayout<2, 2>::kMaxKeys
        return _KF_ATTN_PATH_WGMMA_512
    return _KF_ATTN_PATH_WGMMA_1024  # HopperLayout<1, 4>::kMaxKeys = _KF_ATTN_WGMMA_MAX_KEYS


def _kf_attn_dispatch(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """The recipe's dispatch decision for an SDPA call: (path, None) with the kernel path that runs it, or
    (None, reason) when PyTorch's own SDPA must (the reason a short phrase)."""
    reason = _kf_attn_fallback_reason(query, key, value, attn_mask, dropout_p, is_causal, enable_gqa)
    if reason is not None:
        return None, reason
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    return _kf_attn_kernel_path(key.shape[-2], is_causal, scale, query.shape[-2], query.dtype), None


def _kf_attn_forward(query, key, value, is_causal=False, scale=None, path=_KF_ATTN_PATH_AUTO):
    """Runs a kforge kernel directly (no fallback): 3-D (N, L, E) or 4-D (B, H, L, E) fp16/bf16/fp32 CUDA tensors;
    key/value may have fewer heads than query when they divide its count (grouped-query attention, as SDPA's
    enable_gqa). path: a _KF_ATTN_PATH_* kernel, or AUTO for _kf_attn_kernel_path's choice; the extension checks
    that the kernel can take the inputs and raises otherwise."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    if path == _KF_ATTN_PATH_AUTO:
        path = _kf_attn_kernel_path(key.shape[-2], is_causal, scale, query.shape[-2], query.dtype)
    squeeze = query.dim() == 3
    if squeeze:
        query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
    ext = _kf_attn_extension()
    if path == _KF_ATTN_PATH_CHUNKED:
        chunk, full_path, diag_path = _kf_attn_chunk_plan(key.shape[-2], is_causal, scale)
        out = ext.kforge_attention_forward_chunked(query, key, value, bool(is_causal), scale, chunk, full_path, diag_path)
    else:
        out = ext.kforge_attention_forward(query, key, value, bool(is_causal), scale, int(path))
    return out.squeeze(0) if squeeze else out


def _kf_attn_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention, on kforge kernels where they apply."""
    path, _ = _kf_attn_dispatch(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    if path is not None:
        return _kf_attn_forward(query, key, value, is_causal=is_causal, scale=scale, path=path)
    kwargs = {"attn_mask": attn_mask, "dropout_p": dropout_p, "is_causal": is_causal, "scale": scale}
    if enable_gqa:
        kwargs["enable_gqa"] = True  # only passed when set: the keyword is newer than PyTorch 2.1
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, **kwargs)
