"""CPU checks of the attention recipe: the generated ModelNew imports and falls back correctly without a
GPU, and the CUDA compiles for sm_90a with no register spills in any kernel the extension launches."""

from __future__ import annotations

import importlib.util
import math
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
    for name in ("attn_merge_chunks", "attn_hopper_kernel", "kforge_attention_forward_chunked", "wgmma.mma_async"):
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
    assert fr(q, q, q, enable_gqa=True) == "not all on one CUDA device"  # grouped K/V heads are no reason
    # dispatch is the whole decision: PyTorch's reason, or the kernel
    assert generated.dispatch(q, q, q) == (None, "not all on one CUDA device")


def test_kernel_path_is_the_fastest_kernel_that_holds_the_keys(generated):
    kp, m = generated.kernel_path, generated
    s = 1 / 32
    assert kp(512, False, s) == kp(1, True, s) == m.PATH_WGMMA_512_REGP_MC  # the seed shape
    assert kp(513, False, s) == kp(1024, False, s) == kp(513, True, s) == kp(1024, True, s) == m.PATH_WGMMA_1024_REGP_SPLIT
    assert kp(1025, False, s) == kp(4096, True, s) == kp(100000, False, -1.0) == m.PATH_CHUNKED  # key chunks
    # The register-P kernels need fp32(scale * log2 e) > 0; everything else takes P in shared memory.
    for scale in (0.0, -0.0, -s, float("nan"), 2.0**-151):
        assert kp(512, False, scale) == m.PATH_WGMMA_512, scale
        assert kp(1024, False, scale) == m.PATH_WGMMA_1024, scale
    tiny = 2.0**-150 / 1.4426950216293335  # scale * log2e rounds to the smallest fp32 subnormal or to 0
    assert kp(512, False, tiny * 1.0001) == m.PATH_WGMMA_512_REGP_MC
    assert kp(512, False, tiny * 0.9999) == m.PATH_WGMMA_512
    assert kp(512, False, float("inf")) == m.PATH_WGMMA_512_REGP_MC
    # Up to 16 query rows per head: the split-key decode kernel, at every key length, mask and scale.
    for keys, causal, scale in ((1, False, s), (512, False, s), (4096, True, s), (32768, False, 0.0)):
        assert kp(keys, causal, scale, 1) == kp(keys, causal, scale, 16) == m.PATH_DECODE
    assert kp(512, False, s, 17) == m.PATH_WGMMA_512_REGP_MC and kp(4096, False, s, 17) == m.PATH_CHUNKED
    # float32 has one kernel, whatever the mask or scale (fallback_reason keeps it within 512 keys and 17+ rows).
    for keys, causal, scale in ((1, False, s), (512, True, 0.0), (300, False, -1.0)):
        assert kp(keys, causal, scale, 64, torch.float32) == m.PATH_F32_SPLIT
    assert kp(512, False, s, 64, torch.float16) == m.PATH_WGMMA_512_REGP_MC


@pytest.mark.parametrize("keys", [1025, 1088, 1500, 2048, 2049, 4096, 8191, 8192, 16385, 32768, 131072])
def test_chunk_plan_cuts_a_long_row_into_chunks_the_lse_kernels_hold(generated, keys):
    m = generated
    for scale, causal in ((1 / 32, False), (1 / 32, True), (0.0, False), (-0.5, True)):
        chunk, full, diag = m.chunk_plan(keys, causal, scale)
        n = -(-keys // chunk)
        assert 512 < chunk <= m.WGMMA_MAX_KEYS and chunk % 64 == 0, chunk
        assert (n - 1) * chunk < keys <= n * chunk  # no empty chunk
        assert n == -(-keys // m.WGMMA_MAX_KEYS)  # as few chunks as hold the row
        # Only kernels that report their rows' log-sum-exp (attention.cu refuses the others for chunks).
        assert full == diag == (m.PATH_WGMMA_1024_REGP_SPLIT if scale > 0 else m.PATH_WGMMA_1024)


class _FakeExtension:
    """Stands in for the built extension: records the kernel path each call asks for."""

    def __init__(self):
        self.paths = []

    def kforge_attention_forward(self, q, k, v, is_causal, scale, path):
        self.paths.append((path, is_causal, scale))
        return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)

    def kforge_attention_forward_chunked(self, q, k, v, is_causal, scale, chunk_keys, full_path, diag_path):
        self.paths.append((("chunked", chunk_keys, full_path, diag_path), is_causal, scale))
        return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)


def test_the_extension_runs_the_kernel_python_chose(generated, monkeypatch):
    fake = _FakeExtension()
    monkeypatch.setattr(generated, "_kf_attn_extension", lambda: fake)
    monkeypatch.setattr(generated, "_kf_attn_fallback_reason", lambda *args: None)  # as if on an H100
    q = torch.zeros(1, 2, 300, 512, dtype=torch.float16)
    kv = {n: torch.zeros(1, 2, n, 512, dtype=torch.float16) for n in (512, 1000, 2048)}
    generated.scaled_dot_product_attention(q, kv[512], kv[512])
    generated.scaled_dot_product_attention(q, kv[1000], kv[1000], is_causal=True)
    generated.scaled_dot_product_attention(q, kv[1000], kv[1000], scale=-0.1)
    generated.kforge_attention(q[0], kv[2048][0], kv[2048][0])  # 3-D, no applicability check: key chunks
    generated.kforge_attention(q, kv[512], kv[512], path=generated.PATH_WGMMA_512)  # an explicit kernel
    # One query row against 2048 keys, 4 query heads on 2 K/V heads: the decode kernel, enable_gqa not passed on
    # (the extension reads the grouping from the head counts).
    generated.scaled_dot_product_attention(torch.zeros(1, 4, 1, 512, dtype=torch.float16), kv[2048], kv[2048],
                                           enable_gqa=True)
    m, s = generated, 1 / math.sqrt(512)
    assert fake.paths == [(m.PATH_WGMMA_512_REGP_MC, False, s), (m.PATH_WGMMA_1024_REGP_SPLIT, True, s),
                          (m.PATH_WGMMA_1024, False, -0.1),
                          (("chunked", 1024, m.PATH_WGMMA_1024_REGP_SPLIT, m.PATH_WGMMA_1024_REGP_SPLIT), False, s),
                          (m.PATH_WGMMA_512, False, s),
                          (m.PATH_DECODE, False, s)]


def test_python_kernel_paths_are_the_extensions(generated):
    """The extension's `Path` enum is exactly the kernel paths Python chooses among (no "auto": C++ decides
    nothing; "chunked" is several of them, through its own entry point), and only those kernels are instantiated."""
    enum = re.search(r"enum Path : int64_t \{([^}]*)\}", (KERNELS / "attention.cu").read_text()).group(1)
    cpp = {int(v) for v in re.findall(r"=\s*(\d+)", enum)}
    py = {getattr(generated, n) for n in dir(generated) if n.startswith("PATH_") and n not in ("PATH_AUTO", "PATH_CHUNKED")}
    assert cpp == py and not {generated.PATH_AUTO, generated.PATH_CHUNKED} & cpp


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
    decode = {k: v for k, v in report.items() if "attn_decode" in k}
    merge = {k: v for k, v in report.items() if "attn_merge_chunks" in k}
    f32 = {k: v for k, v in report.items() if "attn_hopper_f32_kernel" in k or "attn_f32_fixup" in k}
    # {fp16,bf16} x ({512,1024 keys} with P in shared memory + P in registers x {K/V multicast, split keys};
    # decode x {16, 32}-key stages x {4, 8} column pairs a warp + its combine; the key chunks' merge; float32: the
    # split kernel and its fix-up): the
    # kernels the dispatcher can choose, nothing else
    assert len(hopper) == 8 and len(decode) == 10 and len(merge) == 2 and len(f32) == 2, report
    assert len(report) == len(hopper) + len(decode) + len(merge) + len(f32), report
    for name, (regs, spill, stack) in report.items():
        assert spill == 0 and stack == 0, f"{name}: {spill} B spilled, {stack} B stack"
        assert regs <= 255, name
    # The wgmma kernels run 1 CTA/SM with up to 2 warpgroups; stay clear of the 255 cap with room for edits.
    assert all(regs <= 240 for regs, _, _ in hopper.values()), hopper
    assert all(regs <= 240 for regs, _, _ in f32.values()), f32


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
