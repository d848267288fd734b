"""Whether torch.compile(reference), the optimizer's second yardstick, passes the check every candidate is put to:
its outputs against the reference's on the same inputs, with the same tolerance and the same float64 evidence
(compare.compare_output). A ModelNew is shipped only when it passes; a yardstick that does not is no like-for-like
comparison. Inductor's convolutions and matmuls follow cuDNN's and cuBLAS's TF32 switches, and cuDNN's is on by
default: a TF32 convolution before a normalisation can be 10-100× further from float64 than the reference's
full-precision one. Then the compiled model is checked again with TF32 off for the call (``exact``), and, when
that passes, timed beside the other (the bench's ``compiledExact``), so a report can say both.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .checks.budget import float64_model_bytes, widened_bytes
from .checks.context import has_dropout
from .checks.float64 import float64_copy, widen
from .compare import compare_output, default_tolerance, flatten_outputs


@contextlib.contextmanager
def tf32_off() -> Iterator[None]:
    """cuDNN's and cuBLAS's TF32 switches off for the block, put back on exit (the process's own settings stay)."""
    matmul = torch.backends.cuda.matmul.allow_tf32
    cudnn = torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul
        torch.backends.cudnn.allow_tf32 = cudnn


def tf32_allowed() -> bool:
    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)


def exact(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` called with TF32 off."""

    def call(*args: Any) -> Any:
        with tf32_off():
            return fn(*args)

    return call


def _clones(inputs: list[Any]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def _float64_fits(ref: torch.nn.Module, inputs: list[Any], outputs: list[torch.Tensor], device: torch.device) -> str | None:
    """None when a float64 pass of the reference fits beside what the bench holds, else why not."""
    need = float64_model_bytes(ref) + widened_bytes(inputs) + sum(o.numel() * 8 for o in outputs)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        if need > free // 2:
            return f"not checked: a float64 pass needs {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
    return None


def check(problem: Any, ref: torch.nn.Module, compiled: Callable[[list[Any]], Any], inputs: list[Any],
          device: torch.device) -> dict[str, Any]:
    """``compiled(inputs)`` (torch.compile of ``ref``) against ``ref`` on copies of ``inputs``: {"correct": bool or
    None when not checked, "note": the first failing output's message or why it was not checked}."""
    if has_dropout(ref):
        return {"correct": None, "note": "not checked: active dropout draws other masks in each model"}
    with torch.no_grad():
        ref_out = flatten_outputs(ref(*_clones(inputs)))
        refused = _float64_fits(ref, inputs, ref_out, device)
        if refused is not None:
            return {"correct": None, "note": refused}
        out64 = flatten_outputs(float64_copy(ref)(*widen(inputs)))
        out = flatten_outputs(compiled(_clones(inputs)))
    if len(out) != len(ref_out):
        return {"correct": False, "note": f"{len(out)} outputs against the reference's {len(ref_out)}"}
    dtypes = [x.dtype for x in inputs if isinstance(x, torch.Tensor)] + [o.dtype for o in ref_out]
    default = default_tolerance(dtypes)
    atol = float(getattr(problem, "KFORGE_ATOL", None) or default)
    rtol = float(getattr(problem, "KFORGE_RTOL", None) or default)
    for i, (o, r, r64) in enumerate(zip(out, ref_out, out64, strict=True)):
        verdict = compare_output(i, o, r, r64, atol, rtol)
        if not verdict.passed:
            return {"correct": False, "note": verdict.message}
    return {"correct": True, "note": None}
