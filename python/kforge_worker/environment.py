"""What the numbers were measured on: GPU, driver, SM clock, toolchain versions.

nvidia-smi is optional (containers often lack it); every query returns None rather than failing.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any


def run_text(cmd: list[str], timeout: float = 10.0) -> str | None:
    """stdout of a command, or None if it is missing, fails or hangs."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_tools_on_path() -> None:
    """Puts the interpreter's bin folder on PATH: a venv's ninja is there, and torch runs plain 'ninja'."""
    bindir = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if bindir and bindir not in path.split(os.pathsep):
        os.environ["PATH"] = bindir + (os.pathsep + path if path else "")


def _smi_id(device_index: int) -> str:
    """An nvidia-smi -i selector for torch's device (UUID when torch knows it: CUDA_VISIBLE_DEVICES-proof)."""
    try:
        import torch

        uuid = str(getattr(torch.cuda.get_device_properties(device_index), "uuid", "") or "")
        if uuid:
            return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    except Exception:  # noqa: BLE001
        pass
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    return entries[device_index] if device_index < len(entries) else str(device_index)


def nvidia_smi_query(field: str, device_index: int | None = None) -> str | None:
    if shutil.which("nvidia-smi") is None:
        return None
    cmd = ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"]
    if device_index is not None:
        cmd += ["-i", _smi_id(device_index)]
    out = run_text(cmd)
    if not out:
        return None
    first = out.splitlines()[0].strip()
    return first or None


def driver_version() -> str | None:
    value = nvidia_smi_query("driver_version")
    if value:
        return value
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001 — optional
        return None


def sm_clock_mhz(device_index: int) -> float | None:
    value = nvidia_smi_query("clocks.sm", device_index)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def describe(device: str) -> dict[str, Any]:
    """The protocol's Environment object."""
    import torch

    gpu = None
    driver = None
    if device == "cuda" and torch.cuda.is_available():
        gpu = torch.cuda.get_device_name(torch.cuda.current_device())
        driver = driver_version()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver,
        "gpu": gpu,
        "device": device,
    }


def ninja_version() -> str | None:
    ensure_tools_on_path()
    return run_text(["ninja", "--version"])


def nvcc_version() -> str | None:
    candidates = [shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "nvcc"))
    for nvcc in candidates:
        if nvcc and os.path.exists(nvcc):
            out = run_text([nvcc, "--version"])
            if out:
                match = re.search(r"release ([\d.]+), V([\d.]+)", out)
                return match.group(2) if match else out.splitlines()[-1]
    return None
