"""SM clock and board power while one kernel runs back to back (device script).

    python3 bench/attention/clocks.py [--seconds 3] [--out DIR]

For PyTorch's SDPA and the ModelNew at the seed shape and at B16 H16 S1024 D512: runs the call in a loop
for a few seconds while `nvidia-smi` samples clocks.sm and power.draw every 50 ms; prints the medians and
the calls per second. Says whether a kernel is held back by the power limit (clock under the 1980 MHz
maximum at ~700 W) rather than by its own schedule.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import load_generated, make_inputs  # noqa: E402


def sample_while(fn, seconds):
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    calls, start = 0, time.time()
    while time.time() - start < seconds:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        calls += 5
    elapsed = time.time() - start
    smi.terminate()
    out, _ = smi.communicate()
    rows = [tuple(float(x) for x in line.split(",")) for line in out.strip().splitlines() if line.strip()]
    busy = rows[len(rows) // 5:]  # drop the first samples (ramp-up, and the 0.3 s before the loop)
    return dict(sm_mhz=statistics.median(r[0] for r in busy), power_w=statistics.median(r[1] for r in busy),
                ms_per_call=elapsed / calls * 1e3, samples=len(busy))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    mod = load_generated()
    mod._extension()
    gen = torch.Generator(device="cuda").manual_seed(9)
    rows = []
    for b, h, s, d in [(32, 32, 512, 1024), (16, 16, 1024, 512)]:
        q, k, v = make_inputs(b, h, s, s, d, d, torch.float16, False, gen)
        for name, fn in [("pytorch_sdpa", lambda: F.scaled_dot_product_attention(q, k, v)),
                         ("modelnew", lambda: mod.scaled_dot_product_attention(q, k, v))]:
            fn()
            r = dict(problem=f"B={b} H={h} S={s} D={d} float16", variant=name, **sample_while(fn, args.seconds))
            rows.append(r)
            print(r, flush=True)
            time.sleep(1.0)
        del q, k, v
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "clocks.json").write_text(json.dumps(dict(device=torch.cuda.get_device_name(),
                                                               date=time.strftime("%Y-%m-%d"), rows=rows), indent=1))


if __name__ == "__main__":
    main()
