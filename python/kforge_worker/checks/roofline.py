"""Plausibility: no candidate runs faster than the problem's roofline floor on the device that timed it.

FLOPs are counted on the reference (torch.utils.flop_counter, the same counter torch uses for MFU), bytes
are the minimum traffic: every input, parameter and buffer read once and every output written once. The
ceilings are the datasheet's dense peaks (generous on purpose: a floor must never flag an honest kernel —
fp32 problems get the fp16 tensor-core peak, since split-precision tricks such as 3xTF32 run there).
A measured median below `SLACK` × floor is impossible; the time was not what it claims.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .result import CheckResult, failed, passed, skipped

SLACK = 0.9

# name fragment -> (dense fp16/bf16 tensor FLOP/s, HBM bytes/s); datasheet peaks (SXM parts).
CEILINGS = {
    "H200": (989e12, 4.8e12),
    "H100": (989e12, 3.35e12),
    "GH200": (989e12, 4.0e12),
    "A100": (312e12, 2.04e12),
    "L40S": (362e12, 0.864e12),
    "L4": (121e12, 0.3e12),
    "B200": (2250e12, 8.0e12),
    "RTX 4090": (330e12, 1.01e12),
}


@dataclass
class Floor:
    flops: float
    bytes: float
    peak_flops: float
    peak_bw: float

    @property
    def ms(self) -> float:
        return max(self.flops / self.peak_flops, self.bytes / self.peak_bw) * 1e3

    def describe(self) -> str:
        return (f"{self.flops / 1e9:.3g} GFLOP at {self.peak_flops / 1e12:.3g} TFLOP/s, {self.bytes / 1e6:.4g} MB at "
                f"{self.peak_bw / 1e12:.2f} TB/s -> floor {self.ms:.4g} ms")


def ceilings_for(gpu_name: str | None) -> tuple[float, float] | None:
    if not gpu_name:
        return None
    for fragment, peaks in sorted(CEILINGS.items(), key=lambda kv: -len(kv[0])):
        if fragment in gpu_name:
            return peaks
    return None


def count_flops(model: nn.Module, inputs: list) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return float(counter.get_total_flops())


def min_bytes(model: nn.Module, inputs: list, outputs: list) -> float:
    total = 0
    for x in inputs:
        if isinstance(x, torch.Tensor):
            total += x.numel() * x.element_size()
    for t in list(model.parameters()) + list(model.buffers()):
        total += t.numel() * t.element_size()
    for o in outputs:
        if isinstance(o, torch.Tensor):
            total += o.numel() * o.element_size()
    return float(total)


def peaks_from_env(value: str | None) -> tuple[float, float] | None:
    """KFORGE_PEAKS="FLOPS,BYTES_PER_S": ceilings for a device the table does not know (a CPU in tests, a
    new GPU). Read by the worker before the candidate is imported, so a candidate cannot loosen them."""
    if not value:
        return None
    try:
        flops, bw = (float(x) for x in value.split(","))
    except ValueError:
        return None
    return (flops, bw) if flops > 0 and bw > 0 else None


@dataclass
class Workload:
    """What one forward of the reference must do: reported in the result (`workload`) and used for the floor."""

    flops: float
    bytes: float

    NOTE = "FLOPs: torch.utils.flop_counter on the reference; bytes: every input, parameter, buffer and output once"

    def as_json(self) -> dict | None:
        """The protocol's Workload, or None when there is nothing to place on a roofline (no counted FLOPs)."""
        if self.flops <= 0 or self.bytes <= 0:
            return None
        return {"flops": self.flops, "bytes": self.bytes, "note": self.NOTE}


def measure_workload(model: nn.Module, inputs: list, outputs: list) -> Workload:
    return Workload(count_flops(model, inputs), min_bytes(model, inputs, outputs))


def floor_for(workload: Workload, gpu_name: str | None,
              override: tuple[float, float] | None = None) -> Floor | None:
    peaks = ceilings_for(gpu_name) or override
    if peaks is None:
        return None
    return Floor(workload.flops, workload.bytes, *peaks)


def check_roofline(cand_median_ms: float | None, floor: Floor | None, gpu_name: str | None) -> CheckResult:
    if cand_median_ms is None:
        return skipped("roofline", "no timing")
    if floor is None:
        return skipped("roofline", f"no known ceilings for device {gpu_name or 'cpu'}")
    if cand_median_ms < SLACK * floor.ms:
        return failed("roofline", f"median {cand_median_ms:.4g} ms is below the roofline floor ({floor.describe()}) on "
                                  f"{gpu_name}: the timing did not see the work")
    return passed("roofline", f"median {cand_median_ms:.4g} ms ≥ floor ({floor.describe()}), "
                              f"{floor.ms / cand_median_ms:.0%} of peak")
