"""Where a region's time goes besides its kernel: host (CPU) microseconds per forward call of the reference and
of a ModelNew file, and the GPU time of their kernels (profiler), on the problem's own inputs.

    python bench/optimize/host_overhead.py problems/elu_alpha.py model_new.py [--calls 200]

The timing clock records its start event right after the L2 flush and before the forward is called, so host
time beyond what the flush takes on the GPU shows up as idle GPU time inside the measurement. Host time is
taken with perf_counter over back-to-back calls without synchronising (the GPU queue absorbs the kernels),
so it is the Python + dispatch cost alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from profile_kernels import kernel_events, load


def host_us(fn, calls: int) -> float:
    """Median over 5 runs of the host microseconds per call of `calls` back-to-back calls."""
    fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(runs)


def gpu_us(fn, calls: int = 20) -> float:
    """GPU time of the kernels of one call, from the profiler's CUDA activity (idle gaps excluded)."""
    return sum(e.device_time_total for e in kernel_events(fn, calls)) / calls


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("candidate")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    problem = load(args.problem, "kf_problem")
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    cand_module = load(args.candidate, "kf_candidate")
    cand = cand_module.ModelNew(*problem.get_init_inputs()).cuda()
    cand.load_state_dict(ref.state_dict())
    row = {"problem": args.problem, "candidate": args.candidate}
    with torch.no_grad():
        for name, model in (("ref", ref), ("ours", cand)):
            row[f"{name}_host_us"] = round(host_us(lambda m=model: m(*inputs), args.calls), 1)
            row[f"{name}_gpu_us"] = round(gpu_us(lambda m=model: m(*inputs)), 1)
    print(json.dumps(row))


if __name__ == "__main__":
    main()
