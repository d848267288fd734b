"""The codegen templates (kf_elementwise.cuh, kf_reduce.cuh) compile for sm_90a with every launcher and
accumulator instantiated for fp32, fp16, bf16 and a mixed-type unit, and no kernel uses local memory.

The units are the GPU harness's own (test/gpu/templates_harness.py), so what compiles here is what
test/gpu/test_codegen_templates.py runs. nvcc -c per unit, two at a time (the CI machine has 2 cores).
kf_host.h (torch headers) is syntax-checked with g++ against the CPU torch headers.
"""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import find_nvcc

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test" / "gpu"))

import templates_harness as harness  # noqa: E402


ENTRY = re.compile(
    r"Compiling entry function '(\w+)' for 'sm_90a'.*?(\d+) bytes stack frame, (\d+) bytes spill stores, "
    r"(\d+) bytes spill loads",
    re.S,
)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """ptxas -v log of each .cu unit."""
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    src = tmp_path_factory.mktemp("kf_templates")
    units = [p for p in harness.write_sources(src) if p.suffix == ".cu"]

    def compile_unit(unit: Path) -> tuple[str, str]:
        cmd = [
            nvcc, "-c", str(unit), "-o", str(unit.with_suffix(".o")), "-std=c++17", "-O3",
            "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-Xcompiler", "-fPIC",
            f"-I{harness.CUDA_DIR}", f"-I{src}",
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        log = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"{unit.name} failed:\n{log[-4000:]}"
        return unit.name, log

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(compile_unit, units))


def test_every_launcher_compiles_for_each_dtype(compiled: dict[str, str]) -> None:
    assert set(compiled) == {"kfh_f32.cu", "kfh_f16.cu", "kfh_bf16.cu", "kfh_mixed.cu"}
    for unit, log in compiled.items():
        names = [m[0] for m in ENTRY.findall(log)]
        assert not any("warning" in line.lower() for line in log.splitlines() if "kf_" in line), log[-3000:]
        if unit == "kfh_mixed.cu":
            assert sum("kf_elementwise_kernel" in n for n in names) == 3
            continue
        # Per elementwise functor: vector + scalar 32-bit kernels and the 64-bit scalar one.
        assert sum("kf_elementwise_kernel" in n for n in names) == 3 * len(harness.ELEMENTWISE), unit
        # Per accumulator: row and column kernels (vector and scalar at 32 bits, scalar at 64) and a finalize.
        for acc in ("KfAccSum", "KfAccProd", "KfAccMax", "KfAccMin", "KfAccArgMax", "KfAccArgMin", "KfAccLogSumExp", "KfAccWelford"):
            rows = [n for n in names if "kf_reduce_rows_kernel" in n and acc in n]
            cols = [n for n in names if "kf_reduce_cols_kernel" in n and acc in n]
            fin = [n for n in names if "kf_reduce_finalize_kernel" in n and acc in n]
            assert len(rows) >= 3 and len(cols) >= 3 and len(fin) >= 1, f"{unit}: {acc} kernels missing"


def test_no_kernel_uses_local_memory(compiled: dict[str, str]) -> None:
    for unit, log in compiled.items():
        entries = ENTRY.findall(log)
        assert entries, f"{unit}: no ptxas report"
        for mangled, stack, spill_st, spill_ld in entries:
            assert (int(stack), int(spill_st), int(spill_ld)) == (0, 0, 0), f"{unit} {mangled}: local memory use"


# Every kf_host.h function, called as a generated region's host unit calls them.
HOST_USE = r"""
#include "kf_host.h"
KfShape use(const at::Tensor& a, const at::Tensor& b, cudaError_t err) {
  const KfShape s = kf_broadcast_shape({a, b});
  const KfShape v = kf_broadcast_shape(std::vector<at::Tensor>{a, b});
  const KfTensorRef ra = kf_ref(a, s), rb = kf_ref(b, v);
  kf_check_cuda(err, "region");
  at::Tensor ws = kf_workspace(ra.stride[0] + rb.stride[0], a);
  return kf_shape_of(ws.sizes());
}
"""


# Subsumed in the default run by test_optimize_emit.py's compile of an emitted host unit (kf_host.h and
# kf_region_host.h as generated code uses them); -m heavy keeps this narrower check.
@pytest.mark.heavy
def test_host_header_compiles_against_torch(tmp_path: Path) -> None:
    gxx = shutil.which("g++")
    cuda_include = next(iter(sorted(glob.glob("/usr/local/cuda*/include/cuda_runtime_api.h"))), None)
    if gxx is None or cuda_include is None:
        pytest.skip("g++ or the CUDA headers not installed")
    from torch.utils.cpp_extension import include_paths

    host = tmp_path / "kf_host_use.cpp"
    host.write_text(HOST_USE, encoding="utf8")
    cmd = [
        gxx, "-std=c++17", "-fsyntax-only", str(host), "-DTORCH_EXTENSION_NAME=kfh", "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE",
        f"-I{harness.CUDA_DIR}", f"-I{Path(cuda_include).parent}", f"-I{sysconfig.get_paths()['include']}",
        *[f"-I{p}" for p in include_paths()]
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
