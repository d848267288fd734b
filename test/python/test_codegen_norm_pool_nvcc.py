"""kf_normalize.cuh and kf_pool.cuh compile for sm_90a with every launcher instantiated, without local memory.

test/gpu/harness/norm_pool_harness.cu instantiates kf_launch_normalize for softmax (two-input prologue),
log_softmax, the affine norms (layer/group/instance/batch: x, gamma, beta, also with fp32 parameters) and rms
norm, and kf_launch_pool for max/avg with and without an epilogue input, each for fp32, fp16 and bf16 — the
same file the GPU tests and the benchmark load. nvcc -c with `ptxas -v`: every kernel of both templates must
be present for every dtype and use no stack frame and no spills (the held-row kernels are sized to the
64-register cap; a spill there would quietly halve their bandwidth).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import find_nvcc

REPO = Path(__file__).resolve().parents[2]
TEMPLATES = REPO / "src" / "optimize" / "codegen" / "cuda"
HARNESS = REPO / "test" / "gpu" / "harness" / "norm_pool_harness.cu"

# One nvcc run of every instantiation (~70 s alone, ~165 s beside the parallel pass's other compiles): under -m heavy,
# CI's default run keeps the emitted files' register-target compiles (test_optimize_emit.py), which build these
# templates' held-row kernels. CI had reached 20 min 24 s at 714ff7c.
pytestmark = pytest.mark.heavy

# finalize_kernel depends on the Stat policy only (no element type): checked per policy below.
KERNELS = ("rows_resident_kernel", "row_partial_kernel", "row_partial_vec_kernel", "columns_kernel", "apply_kernel",
           "apply_vec_kernel", "pool_kernel")
STATS = ("KfStatMaxSumExp", "KfStatWelford", "KfStatMeanSquare")
# Itanium-mangled spellings of the element types inside kernel names.
DTYPES = {"fp32": "f", "fp16": "6__half", "bf16": "13__nv_bfloat16"}


@pytest.fixture(scope="module")
def ptxas_entries(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, int, int, int, int]]:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not installed")
    out = tmp_path_factory.mktemp("nvcc") / "norm_pool_harness.o"
    cmd = [
        nvcc, "-c", str(HARNESS), "-o", str(out), "-std=c++17", "-O3",
        "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", f"-I{TEMPLATES}",
    ]
    # A hang guard, not a budget: the compile takes ~70 s alone and shares the cores in the parallel pass.
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    entries = []
    for block in re.split(r"(?=ptxas info\s+: Compiling entry function)", log):
        name = re.search(r"Compiling entry function '(\w+)' for 'sm_90a'", block)
        if not name:
            continue
        regs = re.search(r"Used (\d+) registers", block)
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", block)
        assert regs and frame, f"unparsed ptxas block:\n{block}"
        entries.append((name.group(1), int(regs.group(1)), *(int(g) for g in frame.groups())))
    return entries


def test_every_kernel_is_instantiated_for_every_dtype(ptxas_entries: list[tuple[str, int, int, int, int]]) -> None:
    names = [name for name, *_ in ptxas_entries]
    for kernel in KERNELS:
        for dtype, mangled in DTYPES.items():
            # The output type is the first type argument after the functors: "...<mangled>..." in the name.
            hits = [n for n in names if kernel in n and (mangled in n if dtype != "fp32" else ("6__half" not in n and "bfloat16" not in n))]
            assert hits, f"{kernel} for {dtype} missing from ptxas output"
    for stat in STATS:
        assert any("finalize_kernel" in n and stat in n for n in names), f"finalize_kernel<{stat}> missing"
    # Both held-row flavours (group per row and block per row) and both pool kinds.
    assert any("rows_resident_kernel" in n and "Lb1E" in n for n in names), "block-per-row kernel missing"
    assert any("rows_resident_kernel" in n and "Lb0E" in n for n in names), "group-per-row kernel missing"
    assert any("pool_kernelILi0E" in n for n in names) and any("pool_kernelILi1E" in n for n in names)


def test_no_kernel_uses_local_memory(ptxas_entries: list[tuple[str, int, int, int, int]]) -> None:
    assert ptxas_entries
    offenders = [(n, st, ss, sl) for n, _regs, st, ss, sl in ptxas_entries if (st, ss, sl) != (0, 0, 0)]
    assert not offenders, f"local memory (stack, spill stores, spill loads): {offenders}"


def test_held_row_kernels_fit_full_occupancy(ptxas_entries: list[tuple[str, int, int, int, int]]) -> None:
    # 64 registers = 2048 threads per SM: the one-pass row kernels need the loads of many rows in flight.
    for name, regs, *_ in ptxas_entries:
        if "rows_resident_kernel" in name:
            assert regs <= 64, f"{name}: {regs} registers"
