"""Device script: where the seed-shape attention kernel spends its time.

    python3 bench/attention/profile_seed.py phases --out $OUT    # stage differences + cuBLAS peers
    ncu --clock-control none --set full -k regex:attn_hopper --launch-skip 2 --launch-count 1 \
        -o $OUT/seed python3 bench/attention/profile_seed.py once [--path N]  # one launch under ncu

`phases` times the two wgmma kernels for S_k <= 512 (P in shared memory, and P in registers: the shipped one)
with the head dims of one phase shrunk to 64, so each phase's cost is the difference (METHOD.md: leave a stage
out, take differences), and times the two GEMMs the fused kernel contains as cuBLAS batched GEMMs (what a good
GEMM reaches on these shapes).
"""

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from device_run import load_generated  # noqa: E402

B, H, S, D = 32, 32, 512, 1024


def timed_ms(fn, reps=15, warmup=3):
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def inputs(dqk, dv, dtype=torch.float16):
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B, H, S, dqk, device="cuda", dtype=dtype, generator=gen)
    k = torch.randn(B, H, S, dqk, device="cuda", dtype=dtype, generator=gen)
    v = torch.randn(B, H, S, dv, device="cuda", dtype=dtype, generator=gen)
    return q, k, v


def phases(mod, out_dir):
    rows = []
    paths = {"NWG=2": mod.PATH_WGMMA_512, "P in registers, K/V multicast": mod.PATH_WGMMA_512_REGP_MC}
    for dqk, dv in [(1024, 1024), (1024, 64), (64, 1024), (64, 64)]:
        q, k, v = inputs(dqk, dv)
        for name, path in paths.items():
            ms = timed_ms(lambda: mod.kforge_attention(q, k, v, path=path))
            flops = 2 * B * H * S * S * (dqk + dv)
            rows.append({"path": name, "dqk": dqk, "dv": dv, "ms": ms, "tflops": flops / ms / 1e9})
            print(f"wgmma {name:16} Dqk={dqk:5d} Dv={dv:5d}: {ms:.3f} ms  {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
        del q, k, v
    q, k, v = inputs(D, D)
    qf, kf, vf = (t.reshape(B * H, S, D) for t in (q, k, v))
    p = torch.softmax(torch.bmm(qf, kf.transpose(1, 2)), dim=-1)
    peers = {
        "bmm QK^T (1024 x 512x512x1024)": lambda: torch.bmm(qf, kf.transpose(1, 2)),
        "bmm PV (1024 x 512x1024x512)": lambda: torch.bmm(p, vf),
    }
    for name, fn in peers.items():
        ms = timed_ms(fn)
        flops = 2 * B * H * S * S * D
        rows.append({"peer": name, "ms": ms, "tflops": flops / ms / 1e9})
        print(f"{name}: {ms:.3f} ms  {flops / ms / 1e9:.0f} TFLOP/s", flush=True)
    (Path(out_dir) / "phases.json").write_text(json.dumps(rows, indent=1))


def once(mod, path):
    q, k, v = inputs(D, D)
    for _ in range(3):
        mod.kforge_attention(q, k, v, path=mod.PATH_WGMMA_512 if path is None else path)
    torch.cuda.synchronize()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["phases", "once"])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--path", type=int, default=None, help="kernel path for `once` (model_new.PATH_*)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mod = load_generated()
    phases(mod, args.out) if args.mode == "phases" else once(mod, args.path)


if __name__ == "__main__":
    main()
