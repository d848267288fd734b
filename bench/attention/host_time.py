"""Host time of one ModelNew attention call, split into its parts (device script, seed shape, fp16).

Run on the GPU host from the repo root:  python3 bench/attention/host_time.py [--out DIR]
The GPU is kept busy by the calls themselves (each launch is queued behind the previous one), so every
number is CPU time spent before the launch returns: what a timing loop without an L2 flush hides and a
flushed or host-bound one does not. Medians of single calls measured with time.perf_counter.
"""

import argparse
import json
import math
import os
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from device_run import load_generated


def per_call_us(fn, n=60, drain=False):
    """drain: the GPU's queue emptied before each call (a call of many launches could otherwise fill it)."""
    times = []
    for _ in range(n):
        if drain:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    mod = load_generated()
    mod._extension()
    q, k, v = (torch.randn(32, 32, 512, 1024, dtype=torch.float16, device="cuda") for _ in range(3))
    for _ in range(3):
        mod.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize()
    ext = mod._extension().kforge_attention_forward
    parts = {
        "fallback_reason": lambda: mod.fallback_reason(q, k, v),
        "dispatch": lambda: mod.dispatch(q, k, v),
        "extension_call": lambda: ext(q, k, v, False, 1 / 32, mod.PATH_WGMMA_512_REGP_MC),
        "modelnew_sdpa": lambda: mod.scaled_dot_product_attention(q, k, v),
        "torch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    res = {name: per_call_us(fn) for name, fn in parts.items()}
    res.update(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
               shape="B32 H32 S512 D1024 fp16")
    del q, k, v
    # A long causal row in key chunks (7 kernel calls, the lse fill and the merge): host time of the whole call.
    q, k, v = (torch.randn(4, 16, 4096, 512, dtype=torch.float16, device="cuda") for _ in range(3))
    chunked = mod._extension().kforge_attention_forward_chunked
    plan = mod.chunk_plan(4096, True, 1 / math.sqrt(512))
    long_parts = {
        "chunked_extension_call": lambda: chunked(q, k, v, True, 1 / math.sqrt(512), *plan),
        "chunked_modelnew_sdpa": lambda: mod.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    for fn in long_parts.values():
        fn()
    res.update({name: per_call_us(fn, 30) for name, fn in long_parts.items()}, chunked_shape="B4 H16 S4096 D512 fp16 causal")
    res.update({f"{name}_drained": per_call_us(fn, 30, drain=True) for name, fn in long_parts.items()})
    print(json.dumps(res, indent=1))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host_time.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
