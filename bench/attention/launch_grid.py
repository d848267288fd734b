"""Grid, block, shared memory, registers and duration of each kernel a kforge path launches (device script),
from the PyTorch profiler's trace: what the host code chose (e.g. a persistent grid's clusters x CTAs) and a
quick back-to-back timing (no L2 flush: for A/B of paths in one process, not for records).

    python3 bench/attention/launch_grid.py PATH_NAME [PATH_NAME ...] [--dims B H S D] [--launches N]
"""

import argparse
import json
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

from device_run import load_generated, make_inputs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--dims", type=int, nargs=4, default=[32, 32, 512, 1024])
    ap.add_argument("--launches", type=int, default=1, help="back-to-back launches profiled (durations: no L2 flush)")
    args = ap.parse_args()
    b, h, s, d = args.dims
    mod = load_generated()
    gen = torch.Generator(device="cuda").manual_seed(3)
    q, k, v = make_inputs(b, h, s, s, d, d, torch.float16, False, gen)
    for name in args.paths:
        path = getattr(mod, name)
        mod.kforge_attention(q, k, v, path=path)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.launches):
                mod.kforge_attention(q, k, v, path=path)
            torch.cuda.synchronize()
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            events = json.load(open(f.name))["traceEvents"]
        for e in events:
            if e.get("cat") == "kernel" and "kforge" in e.get("name", ""):
                a = e.get("args", {})
                print(f"{name}: grid {a.get('grid')} block {a.get('block')} smem {a.get('shared memory')} "
                      f"regs {a.get('registers per thread')} {e.get('dur')} us", flush=True)


if __name__ == "__main__":
    main()
