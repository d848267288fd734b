"""Device script: where the per-call host time of the linear_bn_softmax ModelNew goes (TF32 and fp32 modes).

    python3 bench/linear_bn/host_overhead.py --out $OUT

For each mode, PyTorch's Model and the generated ModelNew (1024 x 8192 -> 8192, training) are timed three
ways in one process: GPU time (events only, calls queued back to back), the kforge worker's host-inclusive
method (device sync inside the timed region) and the host's enqueue time of one call on an idle GPU. Then a
profiler trace of five calls each gives the GPU idle time inside a call (span of its kernels minus their sum)
and the CPU time per op, and cProfile shows the Python side of ModelNew.forward.
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "problems"))
from dev_loader import import_path, load_model_new_module  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def gpu_ms(fn, xs, iters, flush):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        flush.zero_()
        starts[i].record()
        fn(xs[i % len(xs)])
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def worker_ms(fn, xs, iters, flush):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(iters):
        flush.zero_()
        start.record()
        fn(xs[i % len(xs)])
        torch.cuda.synchronize()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def enqueue_us(fn, xs, iters):
    times = []
    for i in range(iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(xs[i % len(xs)])
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def trace(fn, xs, calls):
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(xs[i % len(xs)])
            torch.cuda.synchronize()
    kernels = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
        key=lambda e: e.time_range.start,
    )
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    names = [(e.name[:60], round(e.time_range.elapsed_us(), 1)) for e in kernels]
    return table, names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    problem = import_path(os.path.join(REPO, "problems", "gemm_bn_scale_softmax.py"), "lbs_problem")
    mod, path = load_model_new_module()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    report = {"generated": path, "modes": {}}
    text = []
    for tf32 in (True, False):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.manual_seed(0)
        ref = problem.Model(8192, 8192, 1e-5, 0.1, (1,)).cuda()
        torch.manual_seed(0)
        new = mod.ModelNew(8192, 8192, 1e-5, 0.1, (1,)).cuda()
        xs = [torch.rand(1024, 8192, device="cuda") for _ in range(4)]
        mode = "tf32" if tf32 else "fp32"
        row = {}
        with torch.no_grad():
            for _ in range(5):
                ref(xs[0]), new(xs[0])
            for name, model in (("ref", ref), ("ours", new)):
                row[f"{name}_gpu_ms"] = gpu_ms(model, xs, args.iters, flush)
                row[f"{name}_worker_ms"] = worker_ms(model, xs, args.iters, flush)
                row[f"{name}_enqueue_us"] = enqueue_us(model, xs, args.iters)
                table, kernels = trace(model, xs, 3)
                row[f"{name}_kernels_per_call"] = kernels[: len(kernels) // 3]
                text.append(f"==== {mode} {name}: profiler (3 calls) ====\n{table}")
            profiler = cProfile.Profile()
            profiler.enable()
            for i in range(20):
                new(xs[i % 4])
            torch.cuda.synchronize()
            profiler.disable()
            stream = io.StringIO()
            pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(25)
            text.append(f"==== {mode} ModelNew cProfile (20 calls) ====\n{stream.getvalue()}")
        report["modes"][mode] = row
        print(mode, json.dumps({k: v for k, v in row.items() if not k.endswith("per_call")}), flush=True)
        for name in ("ref", "ours"):
            print(f"  {name} kernels/call:", row[f"{name}_kernels_per_call"], flush=True)
        del ref, new, xs
        torch.cuda.empty_cache()
    with open(os.path.join(args.out, "host_overhead.json"), "w") as f:
        json.dump(report, f, indent=1)
    with open(os.path.join(args.out, "host_overhead.txt"), "w") as f:
        f.write("\n\n".join(text))


if __name__ == "__main__":
    main()
