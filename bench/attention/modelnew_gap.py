"""Where the ModelNew call's time above its own kernel goes (device script, seed shape, fp16).

    python3 bench/attention/modelnew_gap.py [--out DIR]

Times the shipped extension's kernel call (explicit path) and the ModelNew call (dispatch checks, automatic
path) round-robin, L2 flushed before every call, CUDA events, medians - once as the benchmarks do, and once
with the GPU kept busy for ~0.3 ms after the flush (torch.cuda._sleep), which hides any host time spent
before the launch. A gap that closes with the sleep is host time; one that stays is on the GPU.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import Timer, load_generated, make_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    mod = load_generated()
    ext = mod._extension()
    timers = {0: Timer(), 600_000: Timer(settle_cycles=600_000)}
    gen = torch.Generator(device="cuda").manual_seed(3)
    rows = []
    for b, h, s, d, path in [(32, 32, 512, 1024, mod.PATH_WGMMA_512_REGP_MC),
                             (16, 16, 1024, 512, mod.PATH_WGMMA_1024_REGP_SPLIT)]:
        q, k, v = make_inputs(b, h, s, s, d, d, torch.float16, False, gen)
        fns = {"kernel": lambda: ext.kforge_attention_forward(q, k, v, False, d ** -0.5, path),
               "modelnew": lambda: mod.scaled_dot_product_attention(q, k, v)}
        for sleep, timer in timers.items():
            t = {name: v[0] for name, v in timer.median_ms(fns, args.reps, warmup=1).items()}
            rows.append(dict(b=b, h=h, s=s, d=d, sleep_cycles=sleep, kernel_ms=t["kernel"], modelnew_ms=t["modelnew"],
                             gap_us=(t["modelnew"] - t["kernel"]) * 1e3))
            print(rows[-1], flush=True)
        del q, k, v
    env = dict(device=torch.cuda.get_device_name(), date=time.strftime("%Y-%m-%d"), torch=torch.__version__,
               reps=args.reps)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "modelnew_gap.json").write_text(json.dumps(dict(env=env, rows=rows), indent=1))


if __name__ == "__main__":
    main()
