"""CPU checks of the attention recipe: the generated ModelNew imports and falls back correctly without a
GPU, and the CUDA compiles for sm_90a with no register spills in any kernel the extension launches."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import find_nvcc

REPO = Path(__file__).resolve().parents[2]
KERNELS = REPO / "kernels" / "attention"
GENERATED = REPO / "generated" / "attention" / "model_new.py"


def load_generated():
    spec = importlib.util.spec_from_file_location("kforge_attention_generated_test", GENERATED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def generated():
    return load_generated()


def test_generated_file_embeds_every_kernel_and_no_placeholder():
    text = GENERATED.read_text()
    assert "@@KFORGE_" not in text
    for name in ("attn_general_kernel", "attn_hopper_kernel", "kforge_attention_forward", "wgmma.mma_async"):
        assert name in text, name
    # Each local header is inlined exactly once (a second copy would redefine everything).
    assert text.count("struct AttnParams {") == 1
    assert "load_inline" in text and "compute_90a" in text


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("causal", [False, True])
def test_cpu_fallback_equals_pytorch(generated, dtype, causal):
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(2, 3, 17, 512, generator=gen).to(dtype)
    k = torch.randn(2, 3, 23, 512, generator=gen).to(dtype)
    v = torch.randn(2, 3, 23, 512, generator=gen).to(dtype)
    got = generated.scaled_dot_product_attention(q, k, v, is_causal=causal)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert torch.equal(got, want)


def test_model_new_matches_reference_model_on_cpu(generated):
    model = generated.ModelNew()
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.rand(1, 2, 9, 1024, generator=gen, dtype=torch.float32).half() for _ in range(3))
    assert torch.equal(model(q, k, v), F.scaled_dot_product_attention(q, k, v))
    assert list(model.state_dict()) == []


def test_fallback_reasons(generated):
    q = torch.randn(1, 2, 8, 512, dtype=torch.float16)
    fr = generated.fallback_reason
    assert fr(q, q, q) == "not all on one CUDA device"
    assert fr(q, q, q, attn_mask=torch.zeros(8, 8)) == "attn_mask"
    assert fr(q, q, q, dropout_p=0.1) == "dropout"
    assert fr(q, q, q, enable_gqa=True) == "enable_gqa"


def _ptxas_report(text: str) -> dict[str, tuple[int, int, int]]:
    """kernel (mangled) -> (registers, spill store bytes, stack frame bytes) from `ptxas -v` output."""
    out: dict[str, tuple[int, int, int]] = {}
    current = None
    stack = spill = 0
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", line)
        if m and current:
            stack, spill = int(m.group(1)), int(m.group(2))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            out[current] = (int(m.group(1)), spill, stack)
            current = None
    return out


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_kernels_compile_for_sm90a_without_spills(tmp_path):
    res = subprocess.run(
        [find_nvcc(), "-c", "-o", str(tmp_path / "dev.o"), str(KERNELS / "attn_device_check.cu"),
         "-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "-Xptxas", "-v"],
        capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    report = _ptxas_report(res.stderr)
    hopper = {k: v for k, v in report.items() if "attn_hopper_kernel" in k or "attn_hopper_regp_kernel" in k}
    general = {k: v for k, v in report.items() if "attn_general_kernel" in k}
    # {fp16,bf16} x ({512,1024 keys} with P in shared memory + P in registers x {K/V multicast, split keys}): the
    # kernels the dispatcher can choose, nothing else
    assert len(hopper) == 8 and len(general) == 4, report
    for name, (regs, spill, stack) in report.items():
        assert spill == 0 and stack == 0, f"{name}: {spill} B spilled, {stack} B stack"
        assert regs <= 255, name
    # The wgmma kernels run 1 CTA/SM with up to 2 warpgroups; stay clear of the 255 cap with room for edits.
    assert all(regs <= 240 for regs, _, _ in hopper.values()), hopper


def _torch_cuda_include_dirs(shim: Path) -> list[str]:
    base = Path(torch.__file__).parent / "include"
    dirs = [base, base / "torch" / "csrc" / "api" / "include", shim]
    try:
        import nvidia.cu13  # the nvidia-* header wheels (cuBLAS/cuSPARSE/runtime) ATen's headers include

        dirs.append(Path(list(nvidia.cu13.__path__)[0]) / "include")
    except ImportError:
        pass
    return [f"-I{d}" for d in dirs]


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_extension_source_compiles_against_torch_headers(tmp_path):
    # CPU torch wheels omit c10/cuda's cmake-generated macro header; on a CUDA build it only says
    # whether c10_cuda is a shared library (it is), so a one-line stand-in is faithful.
    shim = tmp_path / "shim"
    (shim / "c10" / "cuda" / "impl").mkdir(parents=True)
    (shim / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text(
        "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    res = subprocess.run(
        [find_nvcc(), "-c", "-o", str(tmp_path / "attention.o"), str(KERNELS / "attention.cu"),
         "-gencode=arch=compute_90a,code=sm_90a", "-O1", "-std=c++17", *_torch_cuda_include_dirs(shim)],
        capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
