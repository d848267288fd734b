"""``python -m kforge_worker --probe``: what this Python can do, for ``kforge doctor``.

Must never print a traceback: every piece is optional and reported as null (torch's import error as a
one-line string), so the CLI can say exactly what is missing.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from .environment import driver_version, ninja_version, nvcc_version


def cuda_arch_list(torch: Any) -> str:
    """TORCH_CUDA_ARCH_LIST as torch.utils.cpp_extension derives it when unset (every visible GPU's
    capability, clamped to what this torch was built for, the highest with +PTX). A build that sees no GPU
    given this list passes nvcc the same -gencode flags, so its ninja build is reused, not redone."""
    supported = [int("".join(ch for ch in arch.split("_")[1] if ch.isdigit()))
                 for arch in torch.cuda.get_arch_list() if arch.startswith("sm_")]
    ceiling = max(((sm // 10, sm % 10) for sm in supported), default=(99, 9))
    arches = sorted({"{}.{}".format(*min(ceiling, torch.cuda.get_device_capability(i)))
                     for i in range(torch.cuda.device_count())})
    return ";".join(arches[:-1] + [arches[-1] + "+PTX"])


def probe() -> dict[str, Any]:
    """The protocol's ProbeResult."""
    result: dict[str, Any] = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "torch": None,
        "torchError": None,
        "torchCuda": None,
        "cudaAvailable": False,
        "gpu": None,
        "driver": None,
        "ninja": None,
        "nvcc": None,
        "gpuCount": 0,
        "cudaArchList": None,
    }
    try:
        import torch

        result["torch"] = str(torch.__version__)
        result["torchCuda"] = torch.version.cuda
        result["cudaAvailable"] = bool(torch.cuda.is_available())
        if result["cudaAvailable"]:
            result["gpu"] = torch.cuda.get_device_name(0)
            result["gpuCount"] = int(torch.cuda.device_count())
            if torch.version.cuda:  # ROCm builds read PYTORCH_ROCM_ARCH, not this
                try:
                    result["cudaArchList"] = cuda_arch_list(torch)
                except Exception:  # noqa: BLE001 — only a build hint: without it prebuilds see their own GPUs
                    result["cudaArchList"] = None
    except BaseException as exc:  # noqa: BLE001 — a broken torch install is a finding, not a crash
        message = str(exc).strip().splitlines()
        result["torchError"] = f"{type(exc).__name__}: {message[0] if message else ''}".rstrip(": ")
    for key, fn in (("driver", driver_version), ("ninja", ninja_version), ("nvcc", nvcc_version)):
        try:
            result[key] = fn()
        except Exception:  # noqa: BLE001
            result[key] = None
    return result
