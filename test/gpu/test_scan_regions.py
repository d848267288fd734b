"""Scan regions (kf_scan.cuh) on the GPU, end to end: problems with cumsum / cumprod emitted by `kforge optimize
--no-verify`, their ModelNew run on CUDA against the reference and against float64, over row scans (the last dim:
one block per line, tiles with a carry) of lengths below, at and past a tile, column scans (another dim: a thread
per line), transposed and broadcast operands, reverse scans (flip, cumsum, flip), and every float dtype. A file
is emitted per rank and dtype, scanning along two dims; its kernels take any shape of that rank, so every shape of
the rank runs through the one file (nine extensions, compiled in parallel). Needs node on PATH (the emitter)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or shutil.which("node") is None,
                                reason="needs a CUDA device and node")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBLEM = textwrap.dedent('''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, dim, other):
            super().__init__()
            self.dim = dim
            self.other = other

        def forward(self, x, mask, y):
            return (torch.cumsum(x * mask, dim=self.dim) * 0.5 + y, torch.cumprod(torch.sigmoid(x), dim=self.dim),
                    torch.cumsum(y.flip(self.dim), self.dim).flip(self.dim), torch.cumsum(x - y, dim=self.other))

    def get_inputs():
        x = torch.randn({shape}, dtype=torch.{dtype})
        return [x, torch.rand(x.shape) > 0.5, torch.randn({shape}, dtype=torch.{dtype})]

    def get_init_inputs():
        return [{dim}, {other}]
''')

# Per rank: the two dims scanned, and the shapes run: rows of 1, 31, beyond a warp, one tile (2048), one past
# it, several tiles; columns along the first and middle dims.
RANKS = {2: ((1, 0), [(64, 1), (8, 31), (16, 2048), (5, 2049), (4096, 3), (3, 300)]),
         3: ((2, 1), [(3, 7, 5000), (33, 65, 9), (2, 1, 1)]),
         5: ((3, 0), [(2, 3, 4, 5, 6)])}
CASES = [(rank, shape) for rank, (_dims, shapes) in RANKS.items() for shape in shapes]
DTYPES = ["float32", "float16", "bfloat16"]


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _cli():
    # KFORGE_CLI names a bundled CLI (scripts/device-bundle.sh's kforge.mjs) on hosts without node_modules
    bundled = os.environ.get("KFORGE_CLI")
    return ["node", bundled] if bundled else ["node", "--import", "tsx", os.path.join(ROOT, "src", "cli", "main.ts")]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("scans")
    paths = []
    for rank, ((dim, other), shapes) in RANKS.items():
        for dtype in DTYPES:
            path = out / f"scan_r{rank}_{dtype}.py"
            path.write_text(PROBLEM.format(shape=shapes[0], dim=dim, other=other, dtype=dtype))
            paths.append(str(path))
    run = subprocess.run([*_cli(), "optimize", *paths,
                          "--no-verify", "--out-dir", str(out / "new"), "--python", sys.executable],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    # the extensions compile at first use; build them all at once into the shared cache the tests then load from
    warm = "import importlib.util as u,sys; s=u.spec_from_file_location('m',sys.argv[1]); m=u.module_from_spec(s); " \
           "s.loader.exec_module(m); m._kf_ext()"
    news = [str(out / "new" / (os.path.basename(p)[:-3] + "_new.py")) for p in paths]
    with ThreadPoolExecutor(max_workers=max(1, min(len(news), (os.cpu_count() or 2) // 2))) as pool:
        builds = list(pool.map(lambda f: subprocess.run([sys.executable, "-c", warm, f], capture_output=True, text=True,
                                                        timeout=900), news))
    for f, build in zip(news, builds):
        assert build.returncode == 0, (f, build.stderr[-2000:])
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_scans_match_the_reference(emitted, case, dtype):
    rank, shape = CASES[case]
    name = f"scan_r{rank}_{dtype}"
    problem = _load(str(emitted / f"{name}.py"), f"p_{name}")
    cand = _load(str(emitted / "new" / f"{name}_new.py"), f"c_{name}")
    assert "kf_launch_scan" in cand._KF_CUDA_SOURCE
    torch.manual_seed(case)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    new = cand.ModelNew(*problem.get_init_inputs()).cuda()
    dt = getattr(torch, dtype)
    x = torch.randn(shape, dtype=dt, device="cuda")
    mask = torch.rand(shape, device="cuda") > 0.5
    y = torch.randn(shape, dtype=dt, device="cuda")
    variants = [(x, mask, y), (x.transpose(0, -1).contiguous().transpose(0, -1), mask, y)]
    if len(shape) > 1:  # a mask broadcast along the first dim
        variants.append((x, mask[:1], y))
    tol = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}[dtype]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof, torch.no_grad():
        new(*variants[0])
        torch.cuda.synchronize()
    kernels = {e.name for e in prof.events()}
    assert any("kf_scan_" in k for k in kernels), f"no scan kernel ran (fell back?): {sorted(kernels)[:8]}"
    for inputs in variants:
        with torch.no_grad():
            got = new(*inputs)
            want = ref(*inputs)
            wide = problem.Model(*problem.get_init_inputs()).double()(*[t.double() if t.is_floating_point() else t
                                                                         for t in inputs])
        for g, w, d in zip(got, want, wide):
            assert g.dtype == w.dtype and g.shape == w.shape
            # no worse than twice PyTorch's own error against float64, beside the dtype's tolerance
            ours = (g.double() - d).abs().max().item()
            theirs = (w.double() - d).abs().max().item()
            scale = d.abs().max().item() + 1.0
            assert ours <= 2 * theirs + tol[1] * scale, (name, ours, theirs)
            torch.testing.assert_close(g.float(), w.float(), rtol=tol[0], atol=tol[1] * scale)
