"""Recipe regions of `kforge optimize --no-verify` on CPU: the attention and linear_bn_softmax recipes matched
in small models of the same structure as the built-in problems (test/fixtures/optimize/*_tiny.py), emitted as
region methods calling the recipe's runtime. Checked here: the file imports under CPU torch and its fallback
equals the reference (running statistics included); with the runtime's device checks stubbed out, the region
passes the recipe the right values (the fast path's wiring, computed by PyTorch stand-ins); the recipe's CUDA,
as embedded, compiles with nvcc for sm_90a."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import find_nvcc

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures" / "optimize"
CASES = ["attention_tiny", "linear_bn_softmax_tiny"]
# The built-in problems these recipes were written for: captured on the meta device, so their size costs nothing.
BUILT_IN = ["sdpa_fp16", "gemm_bn_scale_softmax"]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    out = tmp_path_factory.mktemp("optimize_recipes")
    run = subprocess.run(
        [node, "--import", "tsx", str(ROOT / "src" / "cli" / "main.ts"), "optimize",
         *[str(FIXTURES / f"{c}.py") for c in CASES], *[str(ROOT / "problems" / f"{p}.py") for p in BUILT_IN],
         "--no-verify", "--out-dir", str(out), "--python", sys.executable],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return {c: str(out / f"{c}_new.py") for c in CASES + BUILT_IN}


def test_built_in_problems_get_their_recipe(emitted: dict[str, str]) -> None:
    sdpa = Path(emitted["sdpa_fp16"]).read_text()
    assert "kf_r0: scaled_dot_product_attention (attention recipe)" in sdpa
    assert "_kf_attn_fallback_reason(Q, K, V, None, 0.0, False, False) is None" in sdpa
    assert "def _kf_ext" not in sdpa  # nothing else to generate: one extension, the recipe's
    lbs = Path(emitted["gemm_bn_scale_softmax"]).read_text()
    assert "kf_r0: linear → batch_norm → mul → softmax (linear_bn_softmax recipe)" in lbs
    assert "_kf_lbs_finish(kf_y, self.gemm.bias, self.bn, self.scale)" in lbs
    assert "self.softmax.dim" in lbs  # nn.Softmax's dim read from the module, as its own call does


def _load(path: str | Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pair(case: str, path: str, tag: str):
    problem = _load(FIXTURES / f"{case}.py", f"p_{case}_{tag}")
    cand = _load(path, f"c_{case}_{tag}")
    init = problem.get_init_inputs()
    torch.manual_seed(0)
    ref = problem.Model(*init)
    torch.manual_seed(0)
    new = cand.ModelNew(*init)
    return problem, cand, ref, new


def _same_state(ref, new) -> None:
    assert ref.state_dict().keys() == new.state_dict().keys()
    for key, value in ref.state_dict().items():
        assert torch.equal(value, new.state_dict()[key]), key


def test_files_hold_recipe_regions_and_each_runtime_once(emitted: dict[str, str]) -> None:
    attn = Path(emitted["attention_tiny"]).read_text()
    assert "(attention recipe)" in attn and "_kf_attn_fallback_reason(Q, K, V, None, 0.0, True, False)" in attn
    assert "is_causal=True, scale=self.softmax_scale" in attn  # the model attribute, read at run time
    assert attn.count("_KF_ATTN_CUDA_SOURCE = r") == 1 and attn.count("def _kf_attn_extension") == 1
    assert "def _kf_ext" in attn and "(pointwise)" in attn  # the relu + residual tail is a generated region
    assert re.search(r"def _kf_build_all\(\):\n.*\n    _kf_ext\(\)\n    _kf_attn_extension\(\)", attn)
    lbs = Path(emitted["linear_bn_softmax_tiny"]).read_text()
    assert "(linear_bn_softmax recipe)" in lbs and lbs.count("def _kf_lbs_finish(") == 1
    assert "_kf_lbs_launch_gemm(inp, self.fc.weight, _kf_lbs_split_cache(self, \"r0\"))" in lbs
    assert "_kf_lbs_finish(kf_y, self.fc.bias, self.norm, self.alpha)" in lbs
    assert "def _kf_ext" not in lbs and "@@KFORGE" not in lbs and "@@KFORGE" not in attn


@pytest.mark.parametrize("case", CASES)
def test_fallback_equals_the_reference_on_cpu(emitted: dict[str, str], case: str) -> None:
    problem, _cand, ref, new = _pair(case, emitted[case], "fallback")
    _same_state(ref, new)
    for mode in ("train", "train", "eval"):
        getattr(ref, mode)()
        getattr(new, mode)()
        inputs = problem.get_inputs()
        with torch.no_grad():
            want = ref(*[x.clone() for x in inputs])
            got = new(*[x.clone() for x in inputs])
        assert got.dtype == want.dtype and torch.equal(got, want)
        _same_state(ref, new)  # running statistics advance identically
    # Autograd recording takes the reference's ops too: gradients equal.
    inputs = [x.float().requires_grad_() if x.is_floating_point() else x for x in problem.get_inputs()]
    if case == "attention_tiny":
        inputs = [x.detach().half().requires_grad_() for x in inputs]
    ref.train(), new.train()
    ref(*inputs).float().square().sum().backward()
    grads = [x.grad.clone() for x in inputs]
    for x in inputs:
        x.grad = None
    new(*inputs).float().square().sum().backward()
    for g, x in zip(grads, inputs):
        assert torch.equal(g, x.grad)


def test_attention_region_passes_the_recipe_its_arguments(emitted: dict[str, str]) -> None:
    """Stubs for the device-only parts: the region must call the recipe with q, k, v, is_causal and the scale."""
    problem, cand, ref, new = _pair("attention_tiny", emitted["attention_tiny"], "wiring")
    calls = []

    def forward(q, k, v, is_causal=False, scale=None):
        calls.append((is_causal, scale))
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=is_causal, scale=scale).half()

    cand._kf_attn_fallback_reason = lambda *args: None
    cand._kf_attn_forward = forward
    new.softmax_scale = ref.softmax_scale = 0.125  # changed after construction: read on every call
    q, k, v = problem.get_inputs()
    with torch.no_grad():
        got = new(q, k, v)
        want = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, scale=0.125).half()
    assert calls == [(True, 0.125)]
    assert torch.equal(got, torch.relu(want) + q)
    cand._KF_DISABLED.add("r0")  # the optimizer's switch: the reference's op
    with torch.no_grad():
        assert torch.equal(new(q, k, v), ref(q, k, v)) and len(calls) == 1


def test_linear_bn_softmax_region_passes_the_recipe_its_modules(emitted: dict[str, str]) -> None:
    """The region's fast path on CPU with the extension replaced by PyTorch stand-ins for its three entry
    points: the runtime's own checks, weight-split cache and BatchNorm bookkeeping run as on the GPU."""
    problem, cand, ref, new = _pair("linear_bn_softmax_tiny", emitted["linear_bn_softmax_tiny"], "wiring")

    class Ext:
        splits = 0

        def split_weight_tf32x3(self, w, chunk):
            Ext.splits += 1
            return torch.cat([w, w, w], dim=1)

        def linear_no_bias(self, x, w, split, fp32_accurate, k_chunk):
            return x @ w.t()

        def bn_scale_softmax_(self, y, bias, gamma, beta, scale, rm, rv, nbt, batch_stats, update, momentum,
                              cumulative, eps):
            if nbt is not None:
                nbt.add_(1)
            y = y + bias
            z = F.batch_norm(y, rm, rv, gamma, beta, batch_stats, momentum, eps)
            return torch.softmax(z * scale, dim=1)

    cand._kf_lbs_module = Ext()
    applies = cand._kf_lbs_gemm_applies
    cand._kf_lbs_gemm_applies = lambda x, w, others: not torch.is_grad_enabled()
    with torch.no_grad():
        for mode in ("train", "train", "eval"):
            getattr(ref, mode)()
            getattr(new, mode)()
            x = problem.get_inputs()[0]
            torch.testing.assert_close(new(x), ref(x), rtol=1e-6, atol=1e-7)
            _same_state(ref, new)
        # Safe default: no cache (the extension splits the weight on every call), so a write through
        # `.data` can never leave a stale split.
        assert Ext.splits == 0
        new.fc.weight.data.copy_(new.fc.weight.data * 0.25)
        ref.fc.weight.data.copy_(ref.fc.weight.data * 0.25)
        torch.testing.assert_close(new(x), ref(x), rtol=1e-6, atol=1e-7)
        new.cache_weight_split = True  # opt-in: cached while the weight is unchanged
        for _ in range(2):
            torch.testing.assert_close(new(x), ref(x), rtol=1e-6, atol=1e-7)
        assert Ext.splits == 1
        new.fc.weight.mul_(0.5)
        ref.fc.weight.mul_(0.5)
        x = problem.get_inputs()[0]
        torch.testing.assert_close(new(x), ref(x), rtol=1e-6, atol=1e-7)
        assert Ext.splits == 2  # an in-place update invalidates it
    assert "_kf_lbs_weight_splits" in new.__dict__ and not any("split" in k for k in new.state_dict())
    cand._kf_lbs_gemm_applies = applies
    assert not cand._kf_lbs_gemm_applies(x, new.fc.weight, ())  # CPU tensors: the real check declines


def _include_flags(shim: Path) -> list[str]:
    from torch.utils.cpp_extension import include_paths

    dirs = [*include_paths(), str(shim)]
    try:
        import nvidia.cu13  # the CUDA/cuBLAS header wheels scripts/setup-python.sh installs

        dirs.append(os.path.join(list(nvidia.cu13.__path__)[0], "include"))
    except ImportError:
        pass
    for base in sys.path:  # cuBLAS headers of other nvidia wheel layouts
        for header in Path(base).glob("nvidia/*/include/cublas_v2.h") if Path(base).is_dir() else []:
            dirs.append(str(header.parent))
    import sysconfig

    return [f"-I{d}" for d in [*dirs, sysconfig.get_paths()["include"]]]


# ~50 s of nvcc on CI's two cores for text the default run already covers: the recipes' sources compile in
# test_attention_recipe.py / test_linear_bn_softmax_nvcc.py, and the header inliner that embeds them is the one
# every emitted region's CUDA goes through (compiled in test_optimize_emit.py). Run with -m heavy.
@pytest.mark.heavy
@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
@pytest.mark.parametrize("case,source", [
    ("attention_tiny", "_KF_ATTN_CUDA_SOURCE"),
    ("linear_bn_softmax_tiny", "_KF_LBS_CUDA_SOURCE"),
])
def test_embedded_recipe_cuda_compiles_for_sm90a(emitted: dict[str, str], case: str, source: str,
                                                 tmp_path: Path) -> None:
    cand = _load(emitted[case], f"nvcc_{case}")
    cu = tmp_path / "recipe.cu"
    cu.write_text(getattr(cand, source))
    # CPU torch wheels omit c10/cuda's cmake-generated macro header; on a CUDA build it only says that
    # c10_cuda is a shared library, so a one-line stand-in is faithful.
    shim = tmp_path / "shim"
    (shim / "c10" / "cuda" / "impl").mkdir(parents=True)
    (shim / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    run = subprocess.run(
        [find_nvcc(), "-c", str(cu), "-o", str(tmp_path / "recipe.o"), "-gencode=arch=compute_90a,code=sm_90a", "-O1", "-std=c++17", "-Xcompiler", "-fPIC",
         "-DTORCH_API_INCLUDE_EXTENSION_H", "-DTORCH_EXTENSION_NAME=kforge_recipe_check", *_include_flags(shim)],
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
