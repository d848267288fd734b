"""What the bandwidth benches of this folder (templates_bw.py, norm_pool_bw.py) share: the command line, the
timer, the copy ceiling and the JSON records.

Timing: CUDA events around each call, L2 flushed (a 256 MiB write) before every call, warm-up first, median of
the repeats. The ceiling: the achieved GB/s of x.clone() of a 1 GiB fp32 tensor (read + write). Every case is
checked against float64 torch on the same inputs before it is timed (`correct`), and torch's own op is timed
in the same process (`ref_ms`, `speedup`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

L2_FLUSH_BYTES = 256 << 20
WARMUP_CALLS = 3
COPY_ELEMENTS = 1 << 28  # 1 GiB of fp32

_flush_buffer: torch.Tensor | None = None


def flush_l2() -> None:
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    _flush_buffer.fill_(1)


def time_ms(fn: Callable[[], Any], reps: int) -> float:
    """Median of `reps` event-timed calls of fn, each after an L2 flush, following WARMUP_CALLS untimed calls."""
    for _ in range(WARMUP_CALLS):
        fn()
    times = []
    for _ in range(reps):
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def parse_args(doc: str, name: str) -> argparse.Namespace | None:
    """The benches' command line (--out, --reps); None, with a line on stderr, when there is no CUDA GPU."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON records file to write")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"{name}: needs a CUDA GPU", file=sys.stderr)
        return None
    return args


class BandwidthRun:
    """One run on this process's GPU: the copy ceiling, a seeded generator the cases draw their inputs from
    (the copy's tensor is drawn first, so inputs depend on nothing but the seed), and the records so far."""

    def __init__(self, reps: int, seed: int = 0) -> None:
        self.reps = reps
        self.device = torch.cuda.get_device_name()
        self.gen = torch.Generator(device="cuda")
        self.gen.manual_seed(seed)
        big = torch.randn(COPY_ELEMENTS, device="cuda", generator=self.gen)
        copy_ms = time_ms(lambda: big.clone(), reps)
        self.copy_gbs = 2 * big.numel() * big.element_size() / copy_ms / 1e6
        del big
        self.records: list[dict[str, Any]] = []
        print(f"{self.device}: copy {self.copy_gbs:.0f} GB/s (x.clone() of 1 GiB fp32)")

    def measure(self, problem: str, variant: str, dtype: torch.dtype, shape, ours: Callable[[], Any],
                torch_op: Callable[[], Any], ref64: Callable[[], Any], tol: float, bytes_moved: int,
                target: float | None, extra: dict[str, Any] | None = None, equal_nan: bool = False) -> dict[str, Any]:
        """Checks `ours` against float64 `ref64`, times it and torch's `torch_op`, and appends the record.
        `extra` fields stand after `variant` in the record."""
        out = ours()
        want = ref64()
        correct = bool(torch.allclose(out.double(), want.double(), rtol=tol, atol=tol, equal_nan=equal_nan))
        ms = time_ms(ours, self.reps)
        ref_ms = time_ms(torch_op, self.reps)
        gbs = bytes_moved / ms / 1e6
        rec = {
            "device": self.device,
            "date": datetime.date.today().isoformat(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "problem": problem,
            "variant": variant,
            **(extra or {}),
            "dtype": str(dtype).removeprefix("torch."),
            "shape": list(shape),
            "bytes": bytes_moved,
            "ours_ms": ms,
            "ref_ms": ref_ms,
            "speedup": ref_ms / ms,
            "ours_gbs": gbs,
            "copy_gbs": self.copy_gbs,
            "fraction_of_copy": gbs / self.copy_gbs,
            "target_fraction": target,
            "correct": correct,
        }
        self.records.append(rec)
        return rec

    def write(self, out: str) -> None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(self.records, indent=2) + "\n", encoding="utf8")

    def below_target_or_incorrect(self) -> list[dict[str, Any]]:
        return [r for r in self.records
                if (r["target_fraction"] and r["fraction_of_copy"] < r["target_fraction"]) or not r["correct"]]
