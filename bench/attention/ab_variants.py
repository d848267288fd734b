"""A/B of kernel builds in one process (device script).

    python3 bench/attention/ab_variants.py NAME= NAME2@FILE= NAME3@FILE=-DFLAG=1,-DOTHER=2 ... [--reps 30] [--out DIR]

Each NAME=defines builds the generated ModelNew's CUDA source (NAME@FILE=defines: that of the generated
ModelNew file FILE, e.g. an earlier commit's or a branch's written out with `git show`) with those macros as its
own extension (all builds run in parallel subprocesses, then load from the cache). The shipped sources read no
macro: an experiment that needs one lives on a branch, and its generated file is built here as NAME@FILE.
Every variant's kernel is timed round-robin with PyTorch's SDPA
on the same inputs (L2 flushed before every call, CUDA events, medians): the seed shape (fp16, bf16) through the
register-P multicast path and B16 H16 S1024 D512 through the split-key path; the shipped ModelNew call is timed
next to them. Each variant's output is checked against a
float64 reference on a head subset before timing. --f32: instead, float32 at KernelBench's shape (B32 H32 S512 D1024,
torch.rand and randn) through PATH_F32_SPLIT, the pass mark 2x PyTorch's fp32 error (floor 2e-7).
"""

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, load_generated, make_inputs, ref64, rel_err  # noqa: E402


def build(mod, name, defines):
    from torch.utils.cpp_extension import load_inline

    mod = source_module(name, mod)
    name = name.split("@", 1)[0]
    header = "".join(f"#define {d[2:].replace('=', ' ', 1)}\n" for d in defines)
    return load_inline(name=f"kforge_attention_ab_{name}", cpp_sources=[mod._CPP_SOURCE],
                       cuda_sources=[header + mod._CUDA_SOURCE], functions=["kforge_attention_forward"],
                       extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a"])


def parse(specs):
    out = {}
    for spec in specs:
        name, _, defs = spec.partition("=")
        out[name] = [d for d in defs.split(",") if d]
    return out


def source_module(name, default):
    """NAME@FILE: the variant builds the CUDA of another generated ModelNew file (e.g. an earlier commit's)."""
    if "@" not in name:
        return default
    spec = importlib.util.spec_from_file_location(f"kforge_ab_{abs(hash(name))}", name.split("@", 1)[1])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seed-paths", default="PATH_WGMMA_512_REGP_MC",
                    help="comma-separated PATH_* names timed for every variant at the seed shape")
    ap.add_argument("--f32", action="store_true", help="time the float32 kernel at KernelBench's shape instead")
    ap.add_argument("--build-one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    mod = load_generated()
    variants = parse(args.variants)
    if args.build_one:
        (name, defines), = variants.items()
        build(mod, name, defines)
        return
    t0 = time.time()
    procs = [subprocess.Popen([sys.executable, __file__, "--build-one", spec]) for spec in args.variants]
    if any(p.wait() for p in procs):
        raise SystemExit("a variant failed to build")
    exts = {name.split("@", 1)[0]: build(mod, name, defines) for name, defines in variants.items()}
    print(f"built {list(exts)} in {time.time() - t0:.0f}s", flush=True)

    timer = Timer()
    gen = torch.Generator(device="cuda").manual_seed(17)
    rows = []
    seed_paths = [getattr(mod, name) for name in args.seed_paths.split(",")]
    configs = [(32, 32, 512, 1024, torch.float16, seed_paths), (32, 32, 512, 1024, torch.bfloat16, seed_paths),
               (16, 16, 1024, 512, torch.float16, [mod.PATH_WGMMA_1024_REGP_SPLIT])]
    if args.f32:  # torch.rand (KernelBench's inputs) as "float32", randn as the second
        configs = [(32, 32, 512, 1024, "rand", [mod.PATH_F32_SPLIT]), (32, 32, 512, 1024, torch.float32,
                                                                        [mod.PATH_F32_SPLIT])]
    floor = 2e-7 if args.f32 else 1e-5
    for b, h, s, d, dtype, paths in configs:
        if dtype == "rand":
            q, k, v = (torch.rand(b, h, s, d, device="cuda", generator=gen) for _ in range(3))
        else:
            q, k, v = make_inputs(b, h, s, s, d, d, dtype, False, gen)
        sub = (q[:1, :2], k[:1, :2], v[:1, :2])
        ref = ref64(*sub, False, 1 / math.sqrt(d))
        torch_err = rel_err(F.scaled_dot_product_attention(*sub), ref)
        fns = {"pytorch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
               "modelnew": lambda: mod.scaled_dot_product_attention(q, k, v)}
        errs = {}
        for ext_name, ext in exts.items():
            for path in paths:
                name = ext_name if len(paths) == 1 else f"{ext_name}@{path}"
                errs[name] = rel_err(ext.kforge_attention_forward(*sub, False, 1 / math.sqrt(d), path), ref)
                fns[name] = (lambda e, pa: lambda: e.kforge_attention_forward(q, k, v, False, 1 / math.sqrt(d), pa))(
                    ext, path)
        times = timer.median_ms(fns, args.reps, warmup=3)
        ref_ms = times["pytorch_sdpa"][0]
        problem = f"B={b} H={h} S={s} D={d} {str(dtype).split('.')[-1] if dtype != 'rand' else 'float32 rand'}"
        for name, t in times.items():
            err = errs.get(name)
            rows.append(dict(problem=problem, variant=name, ms=t[0], min_ms=t[1], max_ms=t[2], speedup=ref_ms / t[0],
                             err=err, torch_err=torch_err,
                             correct=None if err is None else err <= max(2 * torch_err, floor)))
            print(f"{problem:28s} {name:14s} {t[0]:7.3f} ms {ref_ms / t[0]:6.3f}x"
                  + ("" if err is None else f"  err {err:.2e} (torch {torch_err:.2e})"), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    env = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
               cuda=torch.version.cuda, reps=args.reps, variants=variants)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "ab_variants.json").write_text(json.dumps(dict(env=env, rows=rows), indent=1))


if __name__ == "__main__":
    main()
