"""How the L2 flush before each timed call moves the numbers (device script).

    python3 bench/attention/flush_settle.py [--out DIR]

PyTorch's SDPA, the kforge kernel and the ModelNew call, round-robin, timed four ways: the flush alone (a
256 MB memset right before the start event, as device_run.py has timed so far), the flush followed by ~25
and ~300 us of GPU spinning before the start event, and no flush at all (the inputs are 3-4 GB, far beyond
the 50 MB L2, so a flush changes little of what the kernels read). Ratios vs SDPA per method.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, load_generated, make_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    mod = load_generated()
    ext = mod._extension()
    methods = {"flush": Timer(), "flush+50k": Timer(settle_cycles=50_000), "flush+600k": Timer(settle_cycles=600_000),
               "no_flush": Timer(flush=False)}
    gen = torch.Generator(device="cuda").manual_seed(23)
    rows = []
    for b, h, s, d, dtype in [(32, 32, 512, 1024, torch.float16), (16, 16, 1024, 512, torch.float16),
                              (32, 32, 512, 1024, torch.bfloat16)]:
        q, k, v = make_inputs(b, h, s, s, d, d, dtype, False, gen)
        path = mod.kernel_path(s, False, d ** -0.5)  # the kernel the ModelNew dispatches to
        fns = {"pytorch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
               "kernel": lambda: ext.kforge_attention_forward(q, k, v, False, d ** -0.5, path),
               "modelnew": lambda: mod.scaled_dot_product_attention(q, k, v)}
        for method, timer in methods.items():
            t = timer.median_ms(fns, args.reps, warmup=3)
            ref = t["pytorch_sdpa"][0]
            row = dict(problem=f"B={b} H={h} S={s} D={d} {str(dtype).split('.')[-1]}", method=method,
                       sdpa_ms=ref, kernel_ms=t["kernel"][0], modelnew_ms=t["modelnew"][0],
                       kernel_x=ref / t["kernel"][0], modelnew_x=ref / t["modelnew"][0])
            rows.append(row)
            print(f"{row['problem']:28s} {method:11s} sdpa {ref:6.3f}  kernel {row['kernel_ms']:6.3f} "
                  f"({row['kernel_x']:.3f}x)  modelnew {row['modelnew_ms']:6.3f} ({row['modelnew_x']:.3f}x)", flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    env = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
               reps=args.reps)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "flush_settle.json").write_text(json.dumps(dict(env=env, rows=rows), indent=1))


if __name__ == "__main__":
    main()
