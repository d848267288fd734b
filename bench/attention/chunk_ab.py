"""A/B of key-chunk plans on causal attention (issue 16): which chunk size and which kernels for the full and the
diagonal parts. Calls the extension's forward_chunked with explicit plans beside the ModelNew's own dispatch and
PyTorch, on the same inputs, in one process (device_run.Timer: CUDA events, L2 flushed, shuffled round-robin).

Run on the GPU host from the repo root:  python3 bench/attention/chunk_ab.py [--out DIR]
Every variant's output is checked against float64 on the first batch entry's first two heads first.
"""

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, load_generated, ref64, rel_err  # noqa: E402

CONFIGS = [
    dict(b=8, h=16, s=1024, d=1024, dtype=torch.bfloat16),  # issue 16's causal target (3.5x)
    dict(b=16, h=16, s=1024, d=512, dtype=torch.float16),
    dict(b=4, h=16, s=4096, d=512, dtype=torch.float16),
    dict(b=4, h=8, s=2048, d=1024, dtype=torch.bfloat16),
    dict(b=32, h=32, s=512, d=1024, dtype=torch.float16),  # the seed shape, causal: path 8 vs 9
]


def plans(mod, s):
    """(name, chunk keys, full-part kernel, diagonal kernel) for the chunked variants."""
    p9, p2, p3 = mod.PATH_WGMMA_1024_REGP_SPLIT, mod.PATH_WGMMA_512, mod.PATH_WGMMA_1024
    out = [("c1024_full9_diag3", 1024, p9, p3), ("c1024_full9_diag9", 1024, p9, p9), ("c512_full9_diag2", 512, p9, p2)]
    return [x for x in out if x[1] < s]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mod = load_generated()
    ext = mod._extension()
    timer = Timer()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    results = []
    for cfg in CONFIGS:
        b, h, s, d, dtype = cfg["b"], cfg["h"], cfg["s"], cfg["d"], cfg["dtype"]
        scale = 1 / math.sqrt(d)
        q, k, v = (torch.randn(b, h, s, d, dtype=dtype, device="cuda", generator=gen) for _ in range(3))
        variants = {"pytorch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    "modelnew_dispatch": lambda: mod.scaled_dot_product_attention(q, k, v, is_causal=True)}
        if s <= 512:
            variants["direct_path8"] = lambda: mod.kforge_attention(q, k, v, is_causal=True,
                                                                    path=mod.PATH_WGMMA_512_REGP_MC)
        if s <= 1024:
            variants["direct_path3"] = lambda: mod.kforge_attention(q, k, v, is_causal=True, path=mod.PATH_WGMMA_1024)
            variants["direct_path9"] = lambda: mod.kforge_attention(q, k, v, is_causal=True,
                                                                    path=mod.PATH_WGMMA_1024_REGP_SPLIT)
        for name, chunk, full, diag in plans(mod, s):
            variants[name] = (lambda c, f, g: lambda: ext.kforge_attention_forward_chunked(q, k, v, True, scale, c, f, g))(
                chunk, full, diag)
        sub = (slice(0, 1), slice(0, 2))
        ref = ref64(q[sub], k[sub], v[sub], True, scale)
        torch_err = rel_err(F.scaled_dot_product_attention(q[sub], k[sub], v[sub], is_causal=True), ref)
        errs = {n: rel_err(fn()[sub], ref) for n, fn in variants.items()}
        times = timer.median_ms(variants, 15)
        ref_ms = times["pytorch_sdpa"][0]
        problem = f"causal B={b} H={h} S={s} D={d} {str(dtype).split('.')[-1]}"
        print(problem, flush=True)
        for n, t in sorted(times.items(), key=lambda x: x[1][0]):
            ok = errs[n] <= max(2 * torch_err, 1e-5)
            print(f"  {n:22s} {t[0]:8.3f} ms  x{ref_ms / t[0]:5.2f}  err {errs[n]:.2e} {'ok' if ok else 'BAD'}", flush=True)
            results.append(dict(problem=problem, variant=n, median_ms=t[0], min_ms=t[1], max_ms=t[2],
                                speedup=ref_ms / t[0], err=errs[n], torch_err=torch_err, ok=ok))
        del q, k, v
        torch.cuda.empty_cache()
    (out / "chunk_ab.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(),
                                                       date=time.strftime("%Y-%m-%d"), results=results), indent=1))


if __name__ == "__main__":
    main()
