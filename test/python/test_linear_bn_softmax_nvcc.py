"""The linear_bn_softmax CUDA source, exactly as embedded in the ModelNew file, compiles for sm_90a.

nvcc -c of the inlined source (kernels + host code + cuBLAS calls) against the CPU torch headers and the
nvidia wheels' cuBLAS headers, with `ptxas -v`: every kernel must be present and use no local memory
(no stack frame, no spills). Runs in well under 3 minutes on the 2-core CI machine.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import find_nvcc

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "linear_bn"))

import dev_loader  # noqa: E402

EXPECTED_KERNELS = {
    "split_tf32_interleaved_kernel",
    "column_stats_partial_kernel",
    "bn_train_finalize_kernel",
    "bn_eval_params_kernel",
    "norm_scale_softmax_kernel",
}


def _cublas_include() -> str | None:
    for base in sys.path:
        for header in glob.glob(os.path.join(base, "nvidia", "*", "include", "cublas_v2.h")):
            return os.path.dirname(header)
    return None


def _embedded_cuda_source() -> str:
    namespace: dict[str, object] = {}
    # Execute only the rendered module's top-level string assignments: the placeholders' contents.
    rendered = dev_loader.render()
    match = re.search(r'^_KF_LBS_CUDA_SOURCE = (r""".*?""")$', rendered, re.S | re.M)
    assert match, "the runtime must assign the CUDA placeholder to _KF_LBS_CUDA_SOURCE"
    exec(f"_CUDA_SOURCE = {match.group(1)}", namespace)  # noqa: S102 - our own rendered literal
    return str(namespace["_CUDA_SOURCE"])


def test_cuda_source_compiles_for_sm90a_without_local_memory(tmp_path: Path) -> None:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    cublas = _cublas_include()
    if cublas is None:
        pytest.skip("cuBLAS headers (nvidia wheels) not installed")
    from torch.utils.cpp_extension import include_paths

    source = tmp_path / "linear_bn_softmax.cu"
    source.write_text(_embedded_cuda_source(), encoding="utf8")
    cmd = [
        nvcc,
        "-c",
        str(source),
        "-o",
        str(tmp_path / "linear_bn_softmax.o"),
        "-std=c++17",
        "-O3",
        "-gencode=arch=compute_90a,code=sm_90a",
        "-Xptxas",
        "-v",
        "--expt-relaxed-constexpr",
        "-Xcompiler",
        "-fPIC",
        # CPU torch wheels lack c10/cuda's generated cmake header; it only sets export macros.
        "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",
        "-DTORCH_EXTENSION_NAME=kforge_linear_bn_softmax",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-I{cublas}",
        f"-I{sysconfig.get_paths()['include']}",
        *[f"-I{p}" for p in include_paths()],
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)  # a hang guard
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]

    entries = re.findall(
        r"Compiling entry function '(\w+)' for 'sm_90a'.*?(\d+) bytes stack frame, (\d+) bytes spill stores, "
        r"(\d+) bytes spill loads",
        log,
        re.S,
    )
    names = {mangled for mangled, *_ in entries}
    for kernel in EXPECTED_KERNELS:
        assert any(kernel in name for name in names), f"{kernel} missing from ptxas output:\n{log[-3000:]}"
    for mangled, stack, spill_st, spill_ld in entries:
        assert (int(stack), int(spill_st), int(spill_ld)) == (0, 0, 0), f"{mangled}: local memory use"
