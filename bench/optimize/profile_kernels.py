"""GPU kernels of a problem's reference and of a ModelNew file, from the profiler's CUDA activity: where a
fused region's time goes (conversions, the library call, the generated kernel).

    python bench/optimize/profile_kernels.py problems/conv2d_relu_bias.py model_new.py [--compile]
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import torch


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_events(fn, calls: int = 5) -> list:
    """The profiler's CUDA kernel events of `calls` calls of fn after a warm-up, longest first (idle gaps are
    not in them)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sorted(events, key=lambda e: -e.device_time_total)


def kernels(fn, label: str, calls: int = 5) -> None:
    events = kernel_events(fn, calls)
    total = sum(e.device_time_total for e in events) / calls / 1000
    print(f"{label}: {total:.3f} ms of GPU time per call")
    for e in events[:12]:
        print(f"  {e.device_time_total / calls / 1000:8.3f} ms  {e.count // calls:3d}x  {e.key[:110]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("candidate", nargs="?")
    parser.add_argument("--compile", action="store_true", help="also torch.compile of the reference")
    args = parser.parse_args()
    problem = load(args.problem, "kf_problem")
    torch.manual_seed(0)
    ref = problem.Model(*problem.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    with torch.no_grad():
        kernels(lambda: ref(*inputs), "reference")
        if args.compile:
            compiled = torch.compile(ref)
            kernels(lambda: compiled(*inputs), "torch.compile")
        if args.candidate:
            cand_module = load(args.candidate, "kf_candidate")
            torch.manual_seed(0)
            cand = cand_module.ModelNew(*problem.get_init_inputs()).cuda()
            cand.load_state_dict(ref.state_dict())
            kernels(lambda: cand(*inputs), "candidate")


if __name__ == "__main__":
    main()
