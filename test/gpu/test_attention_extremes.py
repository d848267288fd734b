"""The generated attention kernels at scores far beyond the benchmark's (inputs of ~1e4: scaled scores of ~1e9 in
log2 units), every kernel path, against float64: no NaN or inf where PyTorch has none, and an error no worse than
twice PyTorch's own on the same inputs. The softmax's exp2 takes the raw scores through one FFMA against the row
max; its unrounded product overflowed the 16-bit P there (input_distribution's randn×1e4 variant, device run 138)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

GENERATED = Path(__file__).resolve().parents[2] / "generated" / "attention" / "model_new.py"


@pytest.fixture(scope="module")
def attn():
    spec = importlib.util.spec_from_file_location("kforge_attention_extremes", GENERATED)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).abs().max())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("scale", [1.0, 1e2, 1e4])
def test_every_path_holds_at_large_scores(attn, dtype, scale):
    gen = torch.Generator(device="cuda").manual_seed(3)
    cases = [  # (path, query rows, keys, causal: square only, where SDPA's and the kernels' diagonals agree)
        (attn.PATH_WGMMA_512_REGP_MC, 256, 512, False),
        (attn.PATH_WGMMA_1024_REGP_SPLIT, 1024, 1024, True),
        (attn.PATH_WGMMA_512, 128, 512, False),
        (attn.PATH_WGMMA_1024, 1000, 1000, True),
        (attn.PATH_DECODE, 1, 2048, False),
        (attn.PATH_CHUNKED, 64, 3000, False),
    ]
    for path, sq, sk, causal in cases:
        q = (torch.randn(1, 2, sq, 512, generator=gen, device="cuda") * scale).to(dtype)
        k = (torch.randn(1, 2, sk, 512, generator=gen, device="cuda") * scale).to(dtype)
        v = (torch.randn(1, 2, sk, 512, generator=gen, device="cuda") * scale).to(dtype)
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        torch_out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        ours = attn.kforge_attention(q, k, v, is_causal=causal, path=path)
        what = f"path {path}, {dtype}, inputs x{scale:g}, Sq {sq}, Sk {sk}, causal {causal}"
        assert torch.isfinite(ours).all(), f"{what}: non-finite outputs"
        bound = 2 * _error(torch_out, ref) + 1e-3 * scale
        assert _error(ours, ref) <= bound, f"{what}: error {_error(ours, ref):.3g} > {bound:.3g} (torch's x2)"
