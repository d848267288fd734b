"""Device script: the ModelNew dispatcher's cost where it hands the call to PyTorch (head dims <= 256).

    python3 bench/attention/dispatch_ratio.py --out $OUT

Both sides run the same PyTorch kernel, so the ratio is host time plus noise; the full benchmark's 30
round-robin reps among a dozen variants left +-15% of noise on these 0.1-1.6 ms problems (runs 6, 13). Here
only the two variants alternate, 200 reps each (L2 flushed before every call, CUDA events, medians).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, load_generated, make_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    mod = load_generated()
    timer = Timer()
    gen = torch.Generator(device="cuda").manual_seed(5)
    rows = []
    for d in (64, 128, 256):
        for s in (1024, 4096):
            for causal in (False, True):
                b, h = (16, 16) if s == 1024 else (4, 16)
                q, k, v = make_inputs(b, h, s, s, d, d, torch.float16, False, gen)
                assert mod.fallback_reason(q, k, v) is not None
                t = timer.median_ms({
                    "pytorch_sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                    "modelnew_dispatch": lambda: mod.scaled_dot_product_attention(q, k, v, is_causal=causal),
                }, args.reps, warmup=5)
                ref, ours = t["pytorch_sdpa"][0], t["modelnew_dispatch"][0]
                rows.append(dict(b=b, h=h, s=s, d=d, causal=causal, ref_ms=ref, ours_ms=ours, ratio=ref / ours))
                print(f"B={b} H={h} S={s} D={d} causal={causal}: sdpa {ref:.3f} ms, dispatch {ours:.3f} ms, "
                      f"{ref / ours:.3f}x", flush=True)
    env = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
               cuda=torch.version.cuda, reps=args.reps)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "dispatch_ratio.json").write_text(json.dumps(dict(env=env, rows=rows), indent=1))
    print("min ratio", min(r["ratio"] for r in rows), "geomean",
          math.exp(statistics.mean(math.log(r["ratio"]) for r in rows)))


if __name__ == "__main__":
    main()
