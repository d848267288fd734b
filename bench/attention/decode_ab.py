"""A/B of decode-kernel builds in one process (device script).

    python3 bench/attention/decode_ab.py NAME@FILE ... [--reps 20] [--out DIR]

Each FILE is a generated attention ModelNew (the shipped one, or a branch's written out with `git show`, or a copy
patched for an experiment); each builds as its own extension. The decode path of every build is timed round-robin
with PyTorch's SDPA on the same inputs (device_run.Timer: L2 flushed, CUDA events, medians) on decode shapes, each
output first checked against float64 (err <= 2x PyTorch's). The shipped sources read no switch: an experiment is a
separate file.
"""

import argparse
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_gqa import make, repeat_kv, torch_sdpa  # noqa: E402
from device_run import Timer, ref64, rel_err  # noqa: E402

CONFIGS = [dict(b=8, hq=16, hkv=16, sq=1, sk=32768, d=512, dtype=torch.float16),
           dict(b=8, hq=32, hkv=4, sq=1, sk=32768, d=512, dtype=torch.bfloat16),
           dict(b=4, hq=8, hkv=8, sq=1, sk=16384, d=1024, dtype=torch.float16),
           dict(b=8, hq=16, hkv=16, sq=16, sk=8192, d=512, dtype=torch.float16)]


def load_variant(name, path):
    from torch.utils.cpp_extension import load_inline

    spec = importlib.util.spec_from_file_location(f"kforge_attention_ab_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    ext = load_inline(name=f"kforge_attention_dec_ab_{name}", cpp_sources=[mod._CPP_SOURCE],
                      cuda_sources=[mod._CUDA_SOURCE], functions=["kforge_attention_forward"],
                      extra_cflags=["-O3"],
                      extra_cuda_cflags=["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"])
    return mod, ext


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+", help="NAME@FILE")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    builds = {}
    for spec in args.variants:
        name, path = spec.split("@", 1)
        builds[name] = load_variant(name, path)
    timer = Timer()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    rows = []
    for cfg in CONFIGS:
        b, hq, hkv, sq, sk, d, dtype = (cfg[x] for x in ("b", "hq", "hkv", "sq", "sk", "d", "dtype"))
        q, k, v = make(b, hq, hkv, sq, sk, d, d, dtype, False, gen)
        scale = 1 / math.sqrt(d)
        kr, vr = repeat_kv(q[:1], k[:1], v[:1])
        ref = ref64(q[:1], kr, vr, False, scale)
        torch_err = rel_err(torch_sdpa(q[:1], k[:1], v[:1], False, scale), ref)
        variants = {"pytorch": lambda: torch_sdpa(q, k, v, False, scale)}
        if hq != hkv:
            variants["pytorch_repeat_kv"] = lambda: F.scaled_dot_product_attention(q, *repeat_kv(q, k, v), scale=scale)
        errs = {}
        for name, (mod, ext) in builds.items():
            call = (lambda e, p: lambda qq, kk, vv: e.kforge_attention_forward(qq, kk, vv, False, scale, p))(
                ext, mod.PATH_DECODE)
            errs[name] = rel_err(call(q[:1], k[:1], v[:1]), ref)
            variants[name] = (lambda c: lambda: c(q, k, v))(call)
        times = timer.median_ms(variants, args.reps)
        io = (k.numel() + v.numel()) * k.element_size()
        label = f"B{b} Hq{hq} Hkv{hkv} Sq{sq} Sk{sk} D{d} {str(dtype).split('.')[-1]}"
        for name, t in times.items():
            row = dict(config=label, variant=name, median_ms=t[0], min_ms=t[1], max_ms=t[2], gbps=io / t[0] / 1e6,
                       err=errs.get(name), torch_err=torch_err,
                       ok=None if name not in errs else errs[name] <= max(2 * torch_err, 1e-5))
            rows.append(row)
            print(f"{label:42s} {name:18s} {t[0]:8.3f} ms {row['gbps']:6.0f} GB/s ok={row['ok']}", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "decode_ab.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
